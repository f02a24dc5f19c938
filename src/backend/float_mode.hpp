// Denormal (subnormal) floats. Adam's second moments and small gradients decay into the
// subnormal range during training, and every operation on a subnormal costs x86 cores a
// microcode assist (~100 cycles): a whole run slowed down 2.5x as it went on. tether therefore
// sets flush-to-zero (results that would be subnormal become 0) and denormals-are-zero
// (subnormal inputs read as 0) on every thread it trains or computes on: worker threads and
// their OpenMP teams, OpenBLAS's threads (set_blas_threads), the center thread and the
// evaluation thread. Values below 1.2e-38 carry
// no signal for float32 training.
// `training.flush_denormals: false` turns it off. The embedding API never changes the mode of
// its caller's threads; a user may call set_flush_denormals() on their own.
#pragma once

namespace tether {

// Sets (or clears) flush-to-zero and denormals-are-zero on the calling thread only. A no-op
// on processors where tether does not know the control register.
void set_flush_denormals(bool on);
// True when both modes are set on the calling thread.
bool flush_denormals_enabled();

// The calling thread's floating-point settings (MXCSR's control bits on x86-64: masks,
// rounding, FTZ, DAZ; FPCR on AArch64), so a caller can check that it was left as it was.
unsigned long floating_point_control();

}  // namespace tether
