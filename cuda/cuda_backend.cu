// The CUDA backend: the same Thrust element-wise operations as the CPU backend, compiled by
// nvcc for the CUDA device system, with GEMM on cuBLAS. Memory is plain cudaMalloc (never
// managed memory), and every operation runs on one stream per backend.
//
// Thrust's default policy waits for each operation to finish. Its par_nosync, which queues
// them without waiting, was tried on an H100 and kept out: in alternating runs the MLP trained
// slower with it, the CNN faster at batch 512 only (measured: experiments/README.md).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thrust/system/cuda/execution_policy.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "backend/cuda_backend.hpp"
#include "backend/thrust_ops.inl"

namespace tether {
namespace {

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}
void check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string("cuBLAS: ") + what + " failed with status " + std::to_string(int(status)));
}

constexpr int kReduceThreads = 256;

// Sum of x[i]^2 in double, in one launch: a grid-stride loop (16-byte loads where x is
// aligned), a block sum, and the last block to finish adds the blocks' sums in block order,
// so the result is the same bits on every run. Thrust's transform_reduce over a counting
// iterator read 4 bytes per load, allocated temporary storage per call, and fell further
// short of a device-to-device copy's rate (measured: experiments/README.md).
__device__ double block_sum(double v) {
    __shared__ double warp_sums[kReduceThreads / 32];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < kReduceThreads / 32 ? warp_sums[threadIdx.x] : 0.0;
    if (threadIdx.x < 32)
        for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;  // the block's sum, in thread 0
}

__device__ double squares(float4 q) { return double(q.x) * q.x + double(q.y) * q.y + double(q.z) * q.z + double(q.w) * q.w; }

__global__ void __launch_bounds__(kReduceThreads)
sum_of_squares_kernel(const float* x, std::size_t n, double* block_sums, unsigned* blocks_done, double* total) {
    double v = 0;
    const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = std::size_t(gridDim.x) * blockDim.x;
    std::size_t tail = 0;
    if (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const std::size_t quads = n / 4;
        std::size_t i = first;
        // Four independent loads in flight per thread before the first is used: with one, the
        // kernel read at 0.78 of a copy's rate on an H100.
        for (; i + 3 * stride < quads; i += 4 * stride) {
            const float4 a = __ldg(x4 + i), b = __ldg(x4 + i + stride), c = __ldg(x4 + i + 2 * stride),
                         d = __ldg(x4 + i + 3 * stride);
            v += squares(a) + squares(b) + squares(c) + squares(d);
        }
        for (; i < quads; i += stride) v += squares(__ldg(x4 + i));
        tail = n / 4 * 4;
    }
    for (std::size_t i = tail + first; i < n; i += stride) v += double(x[i]) * x[i];
    v = block_sum(v);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = v;
        __threadfence();  // this block's sum is visible before it is counted
        last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    double all = 0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) all += __ldcg(block_sums + b);  // from L2, never a stale L1 line
    all = block_sum(all);
    if (threadIdx.x == 0) {
        *total = all;
        *blocks_done = 0;  // ready for the next call
    }
}

using CudaPolicy = decltype(thrust::cuda::par.on(cudaStream_t{}));
using CudaOps = ops::ThrustOps<CudaPolicy, /*kRowwise=*/false>;

class CudaBackend final : public CudaOps {
public:
    CudaBackend(int device, cudaStream_t stream) : CudaOps(thrust::cuda::par.on(stream), /*parallel_threshold=*/0), device_(device), stream_(stream) {
        check(cublasCreate(&blas_), "cublasCreate");
        check(cublasSetStream(blas_, stream_), "cublasSetStream");
    }
    ~CudaBackend() override {
        if (ones_) cudaFree(ones_);
        if (reduce_scratch_) cudaFree(reduce_scratch_);
        if (reduce_result_) cudaFreeHost(reduce_result_);
        cublasDestroy(blas_);
        cudaStreamDestroy(stream_);
    }
    DeviceKind kind() const override { return DeviceKind::cuda; }
    std::string description() const override {
        cudaDeviceProp props{};
        cudaGetDeviceProperties(&props, device_);
        return "cuda:" + std::to_string(device_) + " (" + props.name + ", Thrust + cuBLAS" + (tf32_ ? ", TF32 GEMMs" : "") + ")";
    }
    void* allocate_bytes(std::size_t bytes) override {
        void* p = nullptr;
        check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
        return p;
    }
    void release_bytes(void* p) override { cudaFree(p); }
    void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy to device");
        check(cudaStreamSynchronize(stream_), "copy to device");
    }
    void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
        check(cudaStreamSynchronize(stream_), "copy to host");
    }
    void copy(void* dst, const void* src, std::size_t bytes) override {
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "device copy");
    }
    void synchronize() override { check(cudaStreamSynchronize(stream_), "synchronize"); }
    void allow_tf32(bool allowed) override {
        // TF32 needs compute capability 8.0 (Ampere) or newer; older GPUs ignore the mode, and
        // the description then does not claim it.
        cudaDeviceProp props{};
        check(cudaGetDeviceProperties(&props, device_), "cudaGetDeviceProperties");
        check(cublasSetMathMode(blas_, allowed ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
        tf32_ = allowed && props.major >= 8;
    }
    std::shared_ptr<void> pin_host(void* p, std::size_t bytes) override {
        // Portable: pinned for every CUDA context, so that any thread may copy and unregister.
        if (bytes == 0 || cudaHostRegister(p, bytes, cudaHostRegisterPortable) != cudaSuccess) {
            cudaGetLastError();  // refused (a locked-memory limit, say): the copies stay pageable
            return nullptr;
        }
        // The last holder may be any thread (ZeroMQ's I/O thread, the center's): unregister with
        // this backend's device current there, and leave no error in that thread's state,
        // where the next check(cudaGetLastError()) would find it.
        const int device = device_;
        return std::shared_ptr<void>(p, [device](void* q) {
            int current = -1;
            if (cudaGetDevice(&current) != cudaSuccess || current != device) cudaSetDevice(device);
            cudaHostUnregister(q);
            cudaGetLastError();
        });
    }
    void use_on_this_thread() override { check(cudaSetDevice(device_), "cudaSetDevice"); }
    bool host_addressable() const override { return false; }

    double sum_of_squares(const float* x, std::size_t n) override {
        if (n == 0) return 0;
        if (!reduce_scratch_) {
            cudaDeviceProp props{};
            check(cudaGetDeviceProperties(&props, device_), "cudaGetDeviceProperties");
            const int blocks = props.multiProcessorCount * 8;
            // [blocks_done, padding][total][one sum per block], zeroed once: the kernel leaves
            // blocks_done at 0 when it ends. Set up whole or not at all, so a failure here
            // (which throws) is tried again on the next call.
            const std::size_t bytes = (2 + std::size_t(blocks)) * sizeof(double);
            std::unique_ptr<void, void (*)(void*)> scratch(allocate_bytes(bytes), [](void* p) { cudaFree(p); });
            check(cudaMemsetAsync(scratch.get(), 0, bytes, stream_), "clear reduction scratch");
            double* result = nullptr;
            check(cudaMallocHost(&result, sizeof(double)), "cudaMallocHost");
            reduce_scratch_ = static_cast<double*>(scratch.release());
            reduce_result_ = result;
            reduce_blocks_ = blocks;
        }
        const std::size_t wanted = (n / 4 + kReduceThreads - 1) / kReduceThreads;
        const int blocks = int(std::max<std::size_t>(1, std::min<std::size_t>(wanted, std::size_t(reduce_blocks_))));
        sum_of_squares_kernel<<<blocks, kReduceThreads, 0, stream_>>>(
            x, n, reduce_scratch_ + 2, reinterpret_cast<unsigned*>(reduce_scratch_), reduce_scratch_ + 1);
        check(cudaGetLastError(), "sum_of_squares launch");
        check(cudaMemcpyAsync(reduce_result_, reduce_scratch_ + 1, sizeof(double), cudaMemcpyDeviceToHost, stream_),
              "sum_of_squares result");
        check(cudaStreamSynchronize(stream_), "sum_of_squares");
        return *reduce_result_;
    }
    // Every square of a finite float is below 1.2e77 and their sum in double stays finite for
    // any n a memory holds, while one NaN or Inf makes it NaN or Inf: one pass, one launch.
    bool all_finite(const float* x, std::size_t n) override { return std::isfinite(sum_of_squares(x, n)); }

    // Row-major m[rows x cols] is column-major m^T[cols x rows]; out = m^T * ones.
    void column_sums(float* out, const float* m, int rows, int cols) override {
        if (ones_rows_ < rows) {
            if (ones_) cudaFree(ones_);
            ones_ = static_cast<float*>(allocate_bytes(std::size_t(rows) * sizeof(float)));
            fill(ones_, std::size_t(rows), 1.f);
            ones_rows_ = rows;
        }
        const float one = 1.f, zero = 0.f;
        check(cublasSgemv(blas_, CUBLAS_OP_N, cols, rows, &one, m, cols, ones_, 1, &zero, out, 1), "sgemv");
    }

    // cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
    // so the operands swap places and keep their transposition flags.
    void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
              float* c) override {
        check(cublasSgemm(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                          tb ? k : n, a, ta ? m : k, &beta, c, n),
              "sgemm");
    }

private:
    int device_;
    cudaStream_t stream_;
    cublasHandle_t blas_{};
    float* ones_ = nullptr;
    int ones_rows_ = 0;
    double* reduce_scratch_ = nullptr;  // see sum_of_squares
    double* reduce_result_ = nullptr;   // pinned host memory
    int reduce_blocks_ = 0;
    bool tf32_ = false;
};

}  // namespace

}  // namespace tether

// The C entry points libtether finds with dlsym (backend/cuda_backend.hpp). Exceptions stop
// here: the error text crosses the library boundary as a string.
extern "C" {

const char* tether_cuda_version() { return TETHER_VERSION; }

int tether_cuda_device_count() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        return 0;
    }
    return count;
}

tether::Backend* tether_cuda_make_backend(int device, char* error, std::size_t error_size) {
    try {
        if (device < 0) tether::check(cudaGetDevice(&device), "cudaGetDevice");  // the caller's current GPU
        else tether::check(cudaSetDevice(device), "cudaSetDevice");
        // A blocking stream: it waits for work the caller queued on the legacy default stream,
        // so an exchange never reads parameters that the caller's last update is still writing.
        cudaStream_t stream{};
        tether::check(cudaStreamCreate(&stream), "cudaStreamCreate");
        return new tether::CudaBackend(device, stream);
    } catch (const std::exception& e) {
        if (error_size > 0) std::snprintf(error, error_size, "%s", e.what());
        return nullptr;
    }
}

}  // extern "C"
