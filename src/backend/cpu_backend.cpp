// The CPU backend: Thrust on the OpenMP host system for element-wise work, CBLAS (OpenBLAS)
// for GEMM. Thread count is per backend so that N embedded workers can share the cores.
#include <cblas.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <omp.h>
#include <thrust/system/omp/execution_policy.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/float_mode.hpp"
#include "backend/thrust_ops.inl"
#include "util/target_clones.hpp"

namespace tether {
namespace {

// The optimizer updates touch every parameter at every step and dominate the non-GEMM time of
// a CPU step. They run the same Thrust functors as everywhere else, but through a loop that
// the compiler clones per instruction set (AVX-512, AVX2, baseline), picked at load time, so a
// portable binary still uses the wide vectors of the machine it runs on. They run on the
// calling thread only: an OpenMP region here would be outlined out of the clone.
template <typename F>
__attribute__((always_inline)) inline void vector_loop(std::size_t n, const F& f) {
#pragma GCC ivdep
    for (std::size_t i = 0; i < n; ++i) f(i);
}
TETHER_CLONES void run_adam(std::size_t n, ops::AdamStep f) { vector_loop(n, f); }
TETHER_CLONES void run_nesterov(std::size_t n, ops::NesterovStep f) { vector_loop(n, f); }
TETHER_CLONES void run_sgd(std::size_t n, ops::SgdStep f) { vector_loop(n, f); }
// The vector operations of the strategies' worker rules (vector_ops.hpp) run the same way:
// once per exchange over the whole parameter vector, memory-bound, while the center and
// ZeroMQ's I/O thread want the other core. A team of 2 was slower there
// (measured: experiments/README.md).
TETHER_CLONES void run_axpy(std::size_t n, ops::Axpy f) { vector_loop(n, f); }
TETHER_CLONES void run_difference(std::size_t n, ops::Difference f) { vector_loop(n, f); }
TETHER_CLONES void run_scale(std::size_t n, ops::Scale f) { vector_loop(n, f); }

#if defined(__SSE2__)
// out <- a - b with streaming stores, for a result this core does not read again: a worker's
// message (downpour's x - x_pull), which ZeroMQ's I/O thread on the other core sends. A loop
// storing into it fetched each line for ownership first, from that core (the message was last read
// there), slower than a memcpy and a subtraction. Written around the caches, its lines are not
// dirty in this core's cache either when the I/O thread reads them, and downpour over tcp exchanged
// faster; adag, which scales the message right after and so reads it back from memory, gained a
// little all the same (measured: experiments/README.md). Below 256 KB a result stays in the caches
// and ordinary stores are right.
constexpr std::size_t kStreamedElements = std::size_t(1) << 16;
void streamed_difference(float* out, const float* a, const float* b, std::size_t n) {
    std::size_t i = 0;
    for (; i < n && reinterpret_cast<std::uintptr_t>(out + i) % 16 != 0; ++i) out[i] = a[i] - b[i];
    for (; i + 4 <= n; i += 4) _mm_stream_ps(out + i, _mm_sub_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
    for (; i < n; ++i) out[i] = a[i] - b[i];
    _mm_sfence();  // streaming stores are weakly ordered: visible before the message is handed on
}
#endif

class CpuBackend final : public ops::ThrustOps<decltype(thrust::omp::par), /*kRowwise=*/true> {
public:
    // With one thread every loop runs inline; with more, only loops of 64k+ elements fan out.
    CpuBackend(int threads, bool flush_denormals)
        : ThrustOps(thrust::omp::par, threads == 1 ? ~std::size_t(0) : std::size_t(1) << 16), threads_(threads),
          flush_denormals_(flush_denormals) {
        if (!flush_denormals) return;
        // The calling thread first: OpenMP threads created later inherit its mode. Then every
        // thread of its team, which may exist already (the pool persists between loops).
        set_flush_denormals(true);
        if (threads > 1) {
#pragma omp parallel num_threads(threads)
            set_flush_denormals(true);
        }
    }
    DeviceKind kind() const override { return DeviceKind::cpu; }
    int threads() const override { return threads_; }
    // The thread split as it is, so every run prints the choice it made.
    std::string description() const override {
        std::string text = "cpu (" + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s") + ": OpenBLAS " +
                           std::to_string(blas_threads()) + ", ";
        text += threads_ == 1 ? "element-wise loops inline" : "OpenMP team of " + std::to_string(threads_) +
                                                                  " for loops of 65536+ elements";
        return text + (flush_denormals_ ? "; denormals flushed)" : "; denormals kept)");
    }
    void* allocate_bytes(std::size_t bytes) override {
        // 64-byte alignment keeps the BLAS kernels and vector loops on full cache lines.
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!p) throw std::bad_alloc();
        return p;
    }
    void release_bytes(void* p) override { std::free(p); }
    void copy_from_host(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
    void copy_to_host(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
    void copy(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
    void synchronize() override {}
    bool host_addressable() const override { return true; }

    void adam_step(float* x, float* m, float* v, const float* g, std::size_t n, float lr, float beta1, float beta2,
                   float epsilon, float c1, float c2) override {
        run_adam(n, ops::AdamStep{x, m, v, g, lr, beta1, beta2, epsilon, c1, c2});
    }
    void nesterov_step(float* x, float* u, const float* g, std::size_t n, float lr, float mu) override {
        run_nesterov(n, ops::NesterovStep{x, u, g, lr, mu});
    }
    void sgd_step(float* x, const float* g, std::size_t n, float lr) override { run_sgd(n, ops::SgdStep{x, g, lr}); }
    void axpy(float* y, const float* x, std::size_t n, float a) override { run_axpy(n, ops::Axpy{y, x, a}); }
    void difference(float* out, const float* a, const float* b, std::size_t n) override {
        if (out == b) return run_difference(n, ops::Difference{out, a, b});
#if defined(__SSE2__)
        if (out != a && n >= kStreamedElements) return streamed_difference(out, a, b, n);
#endif
        // out <- a, then out <- out - b (bit for bit a - b): a loop storing into a message that
        // another core read last fetches each line first; memcpy's string stores do not.
        if (out != a) std::memcpy(out, a, n * sizeof(float));
        run_axpy(n, ops::Axpy{out, b, -1.f});
    }
    void scale(float* x, std::size_t n, float a) override { run_scale(n, ops::Scale{x, a}); }

    void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
              float* c) override {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                    a, ta ? m : k, b, tb ? k : n, beta, c, n);
    }

    void column_sums(float* out, const float* m, int rows, int cols) override {
        if (int(ones_.size()) < rows) ones_.assign(std::size_t(rows), 1.f);
        cblas_sgemv(CblasRowMajor, CblasTrans, rows, cols, 1.f, m, cols, ones_.data(), 1, 0.f, out, 1);
    }

private:
    // The OpenMP team size is a per-thread setting: set it at each parallel loop, not once, so
    // another backend built on the same thread (or the caller's own OpenMP code) cannot change
    // this backend's share of the cores.
    void prepare_parallel() override { omp_set_num_threads(threads_); }

    int threads_;
    bool flush_denormals_;
    std::vector<float> ones_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads, bool flush_denormals) {
    if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
    return std::make_unique<CpuBackend>(threads, flush_denormals);
}

// OpenBLAS starts its thread pool when the library loads, before tether can set any floating-point
// mode, and a thread keeps the mode it started with: a GEMM on subnormal input split over 2 threads
// ran dozens of times slower than on the flushing caller alone. So the pool is stopped and OpenBLAS
// starts it again from this flushing thread, whose mode the new threads inherit (measured:
// experiments/README.md). blas_thread_shutdown_ is the hook OpenBLAS itself uses around fork();
// weak, so another CBLAS without it simply keeps its threads as they are.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

int blas_threads() { return openblas_get_num_threads(); }
std::string blas_core() {
    const char* name = openblas_get_corename();
    return name ? name : "unknown";
}

void cpu_gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float beta,
              float* c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {  // not every BLAS scales C when k = 0
        for (int r = 0; r < m; ++r)
            for (int j = 0; j < n; ++j) {
                float& out = c[std::size_t(r) * std::size_t(ldc) + std::size_t(j)];
                out = beta == 0.f ? 0.f : beta * out;  // 0, not 0 x a NaN left in the buffer
            }
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.f, a, lda, b,
                ldb, beta, c, ldc);
}

void set_blas_threads(int threads, bool flush_denormals) {
    if (flush_denormals) {
        set_flush_denormals(true);
        if (threads > 1 && blas_thread_shutdown_) blas_thread_shutdown_();
    }
    openblas_set_num_threads(threads);
}

}  // namespace tether
