// The Backend seam: every vector and matrix operation the model, the optimizers and the
// strategies need, on memory that lives where the backend computes (host RAM for the CPU
// backend, GPU memory for the CUDA backend). The element-wise operations are written once
// with Thrust (thrust_ops.inl) and compiled twice; GEMM goes to a CBLAS or to cuBLAS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <tether/vector_ops.hpp>  // VectorOps, DeviceBuffer

namespace tether {

enum class DeviceKind { cpu, cuda };

// A batch of images stored NHWC (channels innermost) seen through a sliding window: the
// geometry of a convolution or a pooling layer. Output sizes round down, as in PyTorch.
struct WindowShape {
    int batch = 0, height = 0, width = 0, channels = 0;
    int kernel_h = 1, kernel_w = 1, stride = 1, pad = 0;
    constexpr int out_height() const { return (height + 2 * pad - kernel_h) / stride + 1; }
    constexpr int out_width() const { return (width + 2 * pad - kernel_w) / stride + 1; }
    // Output positions over the whole batch, and the length of one im2col row.
    constexpr std::size_t positions() const { return std::size_t(batch) * out_height() * out_width(); }
    constexpr std::size_t patch() const { return std::size_t(kernel_h) * kernel_w * channels; }
};

std::string to_string(DeviceKind kind);

// VectorOps (the memory and vector algebra a strategy's WorkerRule may use, public in
// <tether/vector_ops.hpp>) plus what the models and optimizers need.
class Backend : public VectorOps {
public:
    virtual DeviceKind kind() const = 0;
    virtual std::string description() const = 0;
    // CPU threads this backend's operations may use (1 on a GPU).
    virtual int threads() const { return 1; }

    // Makes the calling thread compute on this backend's device: a CUDA backend made on one
    // thread and used on another (the center's evaluation thread) must call it there first.
    virtual void use_on_this_thread() {}

    // Lets GEMMs round their float32 inputs to TF32 (10-bit mantissa) and run on tensor cores,
    // accumulating in float32, as PyTorch's convolutions do by default. The CPU ignores it.
    virtual void allow_tf32(bool /*allowed*/) {}

    // Page-locks host memory [p, p + bytes) so that copies between it and the device run at
    // the DMA engine's rate (a GPU's: about twice a pageable copy's); it stays locked until the
    // returned token is released, which must happen before the memory is freed. The token
    // needs no Backend to release it (a sent message's last holder may be ZeroMQ's I/O thread,
    // after the worker is gone). nullptr when this backend has no use for it (the CPU) or the
    // system refused (then copies simply stay pageable).
    virtual std::shared_ptr<void> pin_host(void* /*p*/, std::size_t /*bytes*/) { return nullptr; }

    // Row-major C[m x n] = alpha * op(A) op(B) + beta * C, with op(A) m x k and op(B) k x n.
    virtual void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                      const float* a, const float* b, float beta, float* c) = 0;

    // Neural-network pieces, on row-major [rows x cols] matrices.
    virtual void add_bias(float* z, const float* bias, int rows, int cols, bool relu) = 0;
    virtual void relu_backward(float* dz, const float* activation, std::size_t n) = 0;
    // out[j] = sum over rows of m[r][j] (a GEMV against a vector of ones, on the BLAS).
    virtual void column_sums(float* out, const float* m, int rows, int cols) = 0;
    // Mean cross-entropy of softmax(logits) against labels; writes d(mean loss)/d(logits)
    // into dlogits when it is not null.
    virtual double softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows,
                                         int cols, float* dlogits) = 0;
    virtual void argmax_rows(std::int32_t* out, const float* m, int rows, int cols) = 0;

    // Layers beyond the MLP (model/layers.hpp), written once in layer_ops.inl.
    // im2col: columns[positions x patch], one row per output position, each row the window's
    // pixels (kernel row, kernel column, channel order) with zeros where it overhangs the pad.
    virtual void im2col(const float* images, float* columns, const WindowShape& s) = 0;
    // The adjoint of im2col: images <- the sum of every column entry that read each pixel.
    virtual void col2im(const float* columns, float* images, const WindowShape& s) = 0;
    // Max pooling with stride == kernel (windows do not overlap); argmax receives, for each
    // output, the index into `in` of the winner, which the backward pass routes the gradient to.
    virtual void maxpool(const float* in, float* out, std::int32_t* argmax, const WindowShape& s) = 0;
    virtual void maxpool_backward(const float* dout, const std::int32_t* argmax, float* din, const WindowShape& s) = 0;
    // Inverted dropout mask: mask[i] = 1/keep with probability keep, else 0, drawn from a
    // counter-based hash of (seed, i), so every backend draws the same mask for the same seed.
    virtual void dropout_mask(float* mask, std::size_t n, float keep, std::uint64_t seed) = 0;
    virtual void multiply(float* out, const float* a, const float* b, std::size_t n) = 0;  // out <- a * b
    virtual void relu(float* out, const float* in, std::size_t n) = 0;                    // out <- max(in, 0)
    // Layer normalisation of each row of in[rows x cols] over its own values (no batch
    // statistics): xhat = (x - mean) / sqrt(var + epsilon), out = xhat * gamma + beta. Keeps
    // xhat and 1/sqrt(var + epsilon) per row for the backward pass, which writes din.
    virtual void layer_norm(const float* in, float* out, float* xhat, float* inverse_std, const float* gamma,
                            const float* beta, int rows, int cols, float epsilon) = 0;
    virtual void layer_norm_backward(const float* dout, const float* xhat, const float* inverse_std,
                                     const float* gamma, float* din, int rows, int cols) = 0;

    // Local-optimizer updates (see optim/optimizer.hpp for the rules).
    virtual void sgd_step(float* x, const float* g, std::size_t n, float lr) = 0;
    virtual void nesterov_step(float* x, float* velocity, const float* g, std::size_t n, float lr,
                               float momentum) = 0;
    virtual void adam_step(float* x, float* m, float* v, const float* g, std::size_t n, float lr,
                           float beta1, float beta2, float epsilon, float bias_correction1,
                           float bias_correction2) = 0;
};

struct BackendOptions {
    std::string device = "auto";  // auto | cpu | cuda
    int threads = 0;              // CPU threads for this backend's operations; 0 = all cores
    int cuda_device = 0;  // < 0: the calling thread's current device
    // CPU: set flush-to-zero and denormals-are-zero on the calling thread and on this
    // backend's OpenMP team (backend/float_mode.hpp). Only for threads tether owns: the
    // backend must then be made on the thread that will use it.
    bool flush_denormals = false;
    bool tf32 = false;  // Backend::allow_tf32 (training.tf32)
};

// Makes the backend `options.device` asks for. Throws ConfigError when "cuda" is asked for
// and this build has no CUDA backend or the machine has no GPU.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

// Number of usable CUDA devices (0 in a build without CUDA).
int cuda_device_count();
bool cuda_built();
// Whether this machine has the NVIDIA driver at all: `auto` counts GPUs only then, without
// loading the CUDA backend otherwise.
bool nvidia_driver_present();

}  // namespace tether
