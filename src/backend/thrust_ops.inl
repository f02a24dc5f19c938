// The element-wise half of the Backend, written once against a Thrust execution policy.
// Included by src/backend/cpu_backend.cpp (thrust::omp::par, compiled by g++) and by
// cuda/cuda_backend.cu (thrust::cuda::par, compiled by nvcc): one source, two systems.
#pragma once

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>
#include <thrust/functional.h>
#include <thrust/execution_policy.h>

#include <cmath>
#include <cstdint>

#include "backend/backend.hpp"

#if defined(__CUDACC__)
#define TETHER_HD __host__ __device__
#else
#define TETHER_HD
#endif

#include "backend/layer_ops.inl"

namespace tether::ops {

struct Fill { float* x; float value; TETHER_HD void operator()(std::size_t i) const { x[i] = value; } };
struct Scale { float* x; float a; TETHER_HD void operator()(std::size_t i) const { x[i] *= a; } };
struct Axpy { float* y; const float* x; float a; TETHER_HD void operator()(std::size_t i) const { y[i] += a * x[i]; } };
struct Difference {
    float* out; const float* a; const float* b;
    TETHER_HD void operator()(std::size_t i) const { out[i] = a[i] - b[i]; }
};
struct Square { const float* x; TETHER_HD double operator()(std::size_t i) const { return double(x[i]) * x[i]; } };
struct IsFinite {
    const float* x;
    // v - v is 0 for every finite v and NaN for NaN and ±Inf; portable to host and device.
    TETHER_HD int operator()(std::size_t i) const { return (x[i] - x[i]) == 0.f ? 1 : 0; }
};
struct Minimum { TETHER_HD int operator()(int a, int b) const { return a < b ? a : b; } };

template <typename Index>  // see Im2colElement (layer_ops.inl)
struct AddBias {
    float* z; const float* bias; int cols; bool relu;
    TETHER_HD void operator()(std::size_t i) const {
        float v = z[i] + bias[Index(i) % Index(cols)];
        z[i] = (relu && v < 0.f) ? 0.f : v;
    }
};
// One row at a time: the inner loop over columns vectorizes on the CPU and needs no modulo.
struct AddBiasRow {
    float* z; const float* bias; int cols; bool relu;
    TETHER_HD void operator()(std::size_t r) const {
        float* row = z + r * std::size_t(cols);
        if (relu)
            for (int j = 0; j < cols; ++j) { const float v = row[j] + bias[j]; row[j] = v > 0.f ? v : 0.f; }
        else
            for (int j = 0; j < cols; ++j) row[j] += bias[j];
    }
};
struct ReluBackward {
    float* dz; const float* activation;
    TETHER_HD void operator()(std::size_t i) const { dz[i] = activation[i] > 0.f ? dz[i] : 0.f; }
};
// Loss of one row; writes that row's gradient of the *mean* loss as a side effect.
struct SoftmaxCrossEntropyRow {
    const float* logits; const std::int32_t* labels; int cols; float inverse_rows; float* dlogits;
    TETHER_HD double operator()(int r) const {
        const float* z = logits + std::size_t(r) * cols;
        float peak = z[0];
        for (int j = 1; j < cols; ++j) peak = z[j] > peak ? z[j] : peak;
        float total = 0.f;
        for (int j = 0; j < cols; ++j) total += expf(z[j] - peak);
        const float log_total = logf(total);
        const int label = labels[r];
        if (dlogits) {
            float* d = dlogits + std::size_t(r) * cols;
            for (int j = 0; j < cols; ++j) {
                const float p = expf(z[j] - peak - log_total);
                d[j] = (p - (j == label ? 1.f : 0.f)) * inverse_rows;
            }
        }
        return double(log_total - (z[label] - peak));
    }
};
struct ArgmaxRow {
    std::int32_t* out; const float* m; int cols;
    TETHER_HD void operator()(int r) const {
        const float* z = m + std::size_t(r) * cols;
        int best = 0;
        for (int j = 1; j < cols; ++j) if (z[j] > z[best]) best = j;
        out[r] = best;
    }
};

struct SgdStep {
    float* x; const float* g; float lr;
    TETHER_HD void operator()(std::size_t i) const { x[i] -= lr * g[i]; }
};
// Nesterov momentum in the form of Sutskever et al. (2013), as most frameworks implement it:
// u <- mu u - lr g;  x <- x + mu u - lr g  (the look-ahead folded into the parameters).
struct NesterovStep {
    float* x; float* u; const float* g; float lr; float mu;
    TETHER_HD void operator()(std::size_t i) const {
        const float step = lr * g[i];
        const float velocity = mu * u[i] - step;
        u[i] = velocity;
        x[i] += mu * velocity - step;
    }
};
// Adam (Kingma & Ba, 2015), bias corrections precomputed by the caller.
struct AdamStep {
    float* x; float* m; float* v; const float* g;
    float lr, beta1, beta2, epsilon, correction1, correction2;
    TETHER_HD void operator()(std::size_t i) const {
        const float gi = g[i];
        const float mi = beta1 * m[i] + (1.f - beta1) * gi;
        const float vi = beta2 * v[i] + (1.f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        x[i] -= lr * (mi / correction1) / (sqrtf(vi / correction2) + epsilon);
    }
};

// Implements every Backend operation except memory and BLAS, on the system of `Policy`.
// kRowwise picks how matrix-shaped element-wise work is split: one row per task suits a few
// CPU threads with vector units, one element per task suits thousands of GPU threads.
// Loops shorter than parallel_threshold run on the calling thread (thrust::seq): on the CPU
// an OpenMP team costs more than a few thousand floats of work, and under oversubscription a
// barrier can wait milliseconds for a descheduled thread. The GPU passes 0 (always parallel).
template <typename Policy, bool kRowwise>
class ThrustOps : public Backend {
public:
    ThrustOps(Policy policy, std::size_t parallel_threshold) : policy_(policy), parallel_threshold_(parallel_threshold) {}

    void fill(float* x, std::size_t n, float value) override { each(n, Fill{x, value}); }
    void scale(float* x, std::size_t n, float a) override { each(n, Scale{x, a}); }
    void axpy(float* y, const float* x, std::size_t n, float a) override { each(n, Axpy{y, x, a}); }
    void difference(float* out, const float* a, const float* b, std::size_t n) override {
        each(n, Difference{out, a, b});
    }
    double sum_of_squares(const float* x, std::size_t n) override {
        return reduce(n, Square{x}, 0.0, thrust::plus<double>());
    }
    bool all_finite(const float* x, std::size_t n) override { return reduce(n, IsFinite{x}, 1, Minimum{}) == 1; }
    void add_bias(float* z, const float* bias, int rows, int cols, bool relu) override {
        if (kRowwise) each(std::size_t(rows), AddBiasRow{z, bias, cols, relu}, std::size_t(rows) * cols);
        else each_value<AddBias>(std::size_t(rows) * cols, z, bias, cols, relu);
    }
    void relu_backward(float* dz, const float* activation, std::size_t n) override {
        each(n, ReluBackward{dz, activation});
    }
    double softmax_cross_entropy(const float* logits, const std::int32_t* labels, int rows, int cols,
                                 float* dlogits) override {
        const double total = reduce(std::size_t(rows), SoftmaxCrossEntropyRow{logits, labels, cols, 1.f / float(rows), dlogits},
                                    0.0, thrust::plus<double>());
        return total / rows;
    }
    void argmax_rows(std::int32_t* out, const float* m, int rows, int cols) override {
        each(std::size_t(rows), ArgmaxRow{out, m, cols});
    }
    void im2col(const float* images, float* columns, const WindowShape& s) override {
        const std::size_t rows = std::size_t(s.batch) * s.out_height();
        if (kRowwise) each(rows, Im2colRow{images, columns, s}, s.positions() * s.patch());
        else each_value<Im2colElement>(s.positions() * s.patch(), images, columns, s);
    }
    void col2im(const float* columns, float* images, const WindowShape& s) override {
        const std::size_t pixels = std::size_t(s.batch) * s.height * s.width;
        if (kRowwise) each(pixels, Col2im{columns, images, s}, pixels * s.channels);
        else each_value<Col2imElement>(pixels * s.channels, columns, images, s);
    }
    void maxpool(const float* in, float* out, std::int32_t* argmax, const WindowShape& s) override {
        if (kRowwise) each(s.positions(), MaxPool{in, out, argmax, s}, s.positions() * s.channels);
        else each_value<MaxPoolElement>(s.positions() * s.channels, in, out, argmax, s);
    }
    void maxpool_backward(const float* dout, const std::int32_t* argmax, float* din, const WindowShape& s) override {
        fill(din, std::size_t(s.batch) * s.height * s.width * s.channels, 0.f);
        const std::size_t outputs = s.positions() * s.channels;
        each(outputs, MaxPoolBackward{dout, argmax, din});
    }
    void dropout_mask(float* mask, std::size_t n, float keep, std::uint64_t seed) override {
        each(n, DropoutMask{mask, keep, seed});
    }
    void multiply(float* out, const float* a, const float* b, std::size_t n) override { each(n, Multiply{out, a, b}); }
    void relu(float* out, const float* in, std::size_t n) override { each(n, Relu{out, in}); }
    void layer_norm(const float* in, float* out, float* xhat, float* inverse_std, const float* gamma, const float* beta,
                    int rows, int cols, float epsilon) override {
        each(std::size_t(rows), LayerNormRow{in, out, xhat, inverse_std, gamma, beta, cols, epsilon},
             std::size_t(rows) * cols);
    }
    void layer_norm_backward(const float* dout, const float* xhat, const float* inverse_std, const float* gamma,
                             float* din, int rows, int cols) override {
        each(std::size_t(rows), LayerNormBackwardRow{dout, xhat, inverse_std, gamma, din, cols}, std::size_t(rows) * cols);
    }
    void sgd_step(float* x, const float* g, std::size_t n, float lr) override { each(n, SgdStep{x, g, lr}); }
    void nesterov_step(float* x, float* velocity, const float* g, std::size_t n, float lr,
                       float momentum) override {
        each(n, NesterovStep{x, velocity, g, lr, momentum});
    }
    void adam_step(float* x, float* m, float* v, const float* g, std::size_t n, float lr, float beta1,
                   float beta2, float epsilon, float correction1, float correction2) override {
        each(n, AdamStep{x, m, v, g, lr, beta1, beta2, epsilon, correction1, correction2});
    }

protected:
    static thrust::counting_iterator<std::size_t> count(std::size_t i) { return thrust::counting_iterator<std::size_t>(i); }
    // `work` is the element count the loop touches (rows x cols for row-wise loops).
    template <typename F>
    void each(std::size_t n, F f, std::size_t work = 0) {
        if ((work ? work : n) < parallel_threshold_) {
            thrust::for_each(thrust::seq, count(0), count(n), f);
            return;
        }
        prepare_parallel();
        thrust::for_each(policy_, count(0), count(n), f);
    }
    // One unit per value, the functor dividing its index in 32 bits when the count fits.
    template <template <typename> class F, typename... Fields>
    void each_value(std::size_t n, Fields... fields) {
        if (n <= std::size_t(UINT32_MAX)) each(n, F<std::uint32_t>{fields...});
        else each(n, F<std::uint64_t>{fields...});
    }
    template <typename F, typename T, typename Op>
    T reduce(std::size_t n, F f, T init, Op op) {
        if (n < parallel_threshold_) return thrust::transform_reduce(thrust::seq, count(0), count(n), f, init, op);
        prepare_parallel();
        return thrust::transform_reduce(policy_, count(0), count(n), f, init, op);
    }

    // Called before each parallel loop (the CPU backend sets its OpenMP team size there).
    virtual void prepare_parallel() {}

    Policy policy_;
    std::size_t parallel_threshold_;
};

}  // namespace tether::ops
