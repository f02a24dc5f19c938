#include "backend/float_mode.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace tether {

#if defined(__x86_64__) || defined(__i386__)

void set_flush_denormals(bool on) {
    _MM_SET_FLUSH_ZERO_MODE(on ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
    _MM_SET_DENORMALS_ZERO_MODE(on ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
}
bool flush_denormals_enabled() {
    return _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON && _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
}
// Bits 0-5 are sticky exception flags that any arithmetic may raise, not settings.
unsigned long floating_point_control() { return _mm_getcsr() & ~0x3Fu; }

#elif defined(__aarch64__)

namespace {
constexpr unsigned long kFlushToZero = 1ul << 24;  // FPCR.FZ: both flushes at once on AArch64
unsigned long read_fpcr() {
    unsigned long value;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(value));
    return value;
}
}  // namespace

void set_flush_denormals(bool on) {
    const unsigned long value = on ? read_fpcr() | kFlushToZero : read_fpcr() & ~kFlushToZero;
    __asm__ __volatile__("msr fpcr, %0" : : "r"(value));
}
bool flush_denormals_enabled() { return (read_fpcr() & kFlushToZero) != 0; }
unsigned long floating_point_control() { return read_fpcr(); }

#else

void set_flush_denormals(bool) {}
bool flush_denormals_enabled() { return false; }
unsigned long floating_point_control() { return 0; }

#endif

}  // namespace tether
