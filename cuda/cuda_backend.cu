// The CUDA backend: the same Thrust element-wise operations as the CPU backend, compiled by
// nvcc for the CUDA device system, with GEMM on cuBLAS. Memory is plain cudaMalloc (never
// managed memory), and every operation runs on one stream per backend.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thrust/system/cuda/execution_policy.h>

#include <cstdio>
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
        cublasDestroy(blas_);
        cudaStreamDestroy(stream_);
    }
    DeviceKind kind() const override { return DeviceKind::cuda; }
    std::string description() const override {
        cudaDeviceProp props{};
        cudaGetDeviceProperties(&props, device_);
        return "cuda:" + std::to_string(device_) + " (" + props.name + ", Thrust + cuBLAS)";
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
    void use_on_this_thread() override { check(cudaSetDevice(device_), "cudaSetDevice"); }
    bool host_addressable() const override { return false; }

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
