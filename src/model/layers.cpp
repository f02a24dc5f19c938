#include "model/layers.hpp"

#include <cmath>

namespace tether {
namespace {

// He initialization (weights ~ N(0, 2 / fan_in), biases 0), as the MLP does.
void he_initialize(float* p, std::size_t fan_in, std::size_t fan_out, std::mt19937_64& rng) {
    std::normal_distribution<float> he(0.f, std::sqrt(2.f / float(fan_in)));
    for (std::size_t i = 0; i < fan_in * fan_out; ++i) p[i] = he(rng);
    for (std::size_t i = 0; i < fan_out; ++i) p[fan_in * fan_out + i] = 0.f;
}

// The affine core shared by dense and conv layers: out[rows x n] = in[rows x k] W + b, with
// an optional fused ReLU.
struct Affine {
    Backend& backend;
    int k, n;
    bool relu;

    std::size_t num_parameters() const { return std::size_t(k) * n + n; }
    void forward(const float* p, const float* in, float* out, int rows) const {
        backend.gemm(false, false, rows, n, k, 1.f, in, p, 0.f, out);
        backend.add_bias(out, p + std::size_t(k) * n, rows, n, relu);
    }
    // dout becomes d(loss)/d(pre-activation); din (if wanted) = dout W^T.
    void backward(const float* p, const float* in, const float* out, float* dout, float* din, float* g,
                  int rows) const {
        if (relu) backend.relu_backward(dout, out, std::size_t(rows) * n);
        backend.gemm(true, false, k, n, rows, 1.f, in, dout, 0.f, g);
        backend.column_sums(g + std::size_t(k) * n, dout, rows, n);
        if (din) backend.gemm(false, true, rows, k, n, 1.f, dout, p, 0.f, din);
    }
};

class Dense final : public Layer {
public:
    Dense(Backend& backend, Shape in, int outputs, bool relu) : affine_{backend, int(in.size()), outputs, relu} {}
    Shape output_shape() const override { return {affine_.n, 1, 1}; }
    std::size_t num_parameters() const override { return affine_.num_parameters(); }
    void initialize(float* host, std::mt19937_64& rng) const override {
        he_initialize(host, std::size_t(affine_.k), std::size_t(affine_.n), rng);
    }
    void forward(const float* p, const float* in, float* out, int rows, const Pass&) override {
        affine_.forward(p, in, out, rows);
    }
    void backward(const float* p, const float* in, const float* out, float* dout, float* din, float* g,
                  int rows) override {
        affine_.backward(p, in, out, dout, din, g, rows);
    }

private:
    Affine affine_;
};

class Conv final : public Layer {
public:
    Conv(Backend& backend, Shape in, int filters, int kh, int kw, int stride, int pad, bool relu)
        : backend_(backend), affine_{backend, kh * kw * in.channels, filters, relu} {
        window_ = WindowShape{0, in.height, in.width, in.channels, kh, kw, stride, pad};
    }
    Shape output_shape() const override { return {affine_.n, window_.out_height(), window_.out_width()}; }
    std::size_t num_parameters() const override { return affine_.num_parameters(); }
    void initialize(float* host, std::mt19937_64& rng) const override {
        he_initialize(host, std::size_t(affine_.k), std::size_t(affine_.n), rng);
    }
    void reserve(int rows) override {
        WindowShape s = window_;
        s.batch = rows;
        if (columns_.size() < s.positions() * s.patch()) {
            columns_ = DeviceBuffer<float>(backend_, s.positions() * s.patch());
            column_gradient_ = DeviceBuffer<float>(backend_, s.positions() * s.patch());
        }
    }
    // The output is NHWC, so [rows * positions x filters] is exactly the GEMM's row-major result.
    void forward(const float* p, const float* in, float* out, int rows, const Pass&) override {
        const WindowShape s = batch(rows);
        backend_.im2col(in, columns_.data(), s);
        affine_.forward(p, columns_.data(), out, int(s.positions()));
    }
    // Relies on columns_ still holding this batch's im2col from the forward pass.
    void backward(const float* p, const float*, const float* out, float* dout, float* din, float* g,
                  int rows) override {
        const WindowShape s = batch(rows);
        affine_.backward(p, columns_.data(), out, dout, din ? column_gradient_.data() : nullptr, g,
                         int(s.positions()));
        if (din) backend_.col2im(column_gradient_.data(), din, s);
    }

private:
    WindowShape batch(int rows) const {
        WindowShape s = window_;
        s.batch = rows;
        return s;
    }
    Backend& backend_;
    Affine affine_;
    WindowShape window_;
    DeviceBuffer<float> columns_, column_gradient_;
};

class MaxPool final : public Layer {
public:
    MaxPool(Backend& backend, Shape in, int size) : backend_(backend), window_{0, in.height, in.width, in.channels, size, size, size, 0} {}
    Shape output_shape() const override { return {window_.channels, window_.out_height(), window_.out_width()}; }
    void reserve(int rows) override {
        const std::size_t outputs = std::size_t(rows) * output_shape().size();
        if (argmax_.size() < outputs) argmax_ = DeviceBuffer<std::int32_t>(backend_, outputs);
    }
    void forward(const float*, const float* in, float* out, int rows, const Pass&) override {
        WindowShape s = window_;
        s.batch = rows;
        backend_.maxpool(in, out, argmax_.data(), s);
    }
    void backward(const float*, const float*, const float*, float* dout, float* din, float*, int rows) override {
        if (!din) return;
        WindowShape s = window_;
        s.batch = rows;
        backend_.maxpool_backward(dout, argmax_.data(), din, s);
    }

private:
    Backend& backend_;
    WindowShape window_;
    DeviceBuffer<std::int32_t> argmax_;
};

class Relu final : public Layer {
public:
    Relu(Backend& backend, Shape in) : backend_(backend), shape_(in) {}
    Shape output_shape() const override { return shape_; }
    void forward(const float*, const float* in, float* out, int rows, const Pass&) override {
        backend_.relu(out, in, std::size_t(rows) * shape_.size());
    }
    void backward(const float*, const float*, const float* out, float* dout, float* din, float*, int rows) override {
        if (!din) return;
        const std::size_t n = std::size_t(rows) * shape_.size();
        backend_.relu_backward(dout, out, n);
        backend_.copy(din, dout, n * sizeof(float));
    }

private:
    Backend& backend_;
    Shape shape_;
};

class Dropout final : public Layer {
public:
    Dropout(Backend& backend, Shape in, float rate) : backend_(backend), shape_(in), keep_(1.f - rate) {}
    Shape output_shape() const override { return shape_; }
    void reserve(int rows) override {
        const std::size_t n = std::size_t(rows) * shape_.size();
        if (mask_.size() < n) mask_ = DeviceBuffer<float>(backend_, n);
    }
    void forward(const float*, const float* in, float* out, int rows, const Pass& pass) override {
        const std::size_t n = std::size_t(rows) * shape_.size();
        masked_ = pass.training;
        if (!masked_) {
            backend_.copy(out, in, n * sizeof(float));
            return;
        }
        backend_.dropout_mask(mask_.data(), n, keep_, pass.seed);
        backend_.multiply(out, in, mask_.data(), n);
    }
    void backward(const float*, const float*, const float*, float* dout, float* din, float*, int rows) override {
        if (!din) return;
        const std::size_t n = std::size_t(rows) * shape_.size();
        if (masked_) backend_.multiply(din, dout, mask_.data(), n);
        else backend_.copy(din, dout, n * sizeof(float));
    }

private:
    Backend& backend_;
    Shape shape_;
    float keep_;
    bool masked_ = false;  // whether the last forward pass applied the mask
    DeviceBuffer<float> mask_;
};

class LayerNorm final : public Layer {
public:
    LayerNorm(Backend& backend, Shape in) : backend_(backend), shape_(in), cols_(int(in.size())) {}
    Shape output_shape() const override { return shape_; }
    std::size_t num_parameters() const override { return 2 * std::size_t(cols_); }
    void initialize(float* host, std::mt19937_64&) const override {
        for (int j = 0; j < cols_; ++j) host[j] = 1.f, host[cols_ + j] = 0.f;
    }
    void reserve(int rows) override {
        const std::size_t n = std::size_t(rows) * cols_;
        if (xhat_.size() < n) {
            xhat_ = DeviceBuffer<float>(backend_, n);
            scratch_ = DeviceBuffer<float>(backend_, n);
            inverse_std_ = DeviceBuffer<float>(backend_, std::size_t(rows));
        }
    }
    void forward(const float* p, const float* in, float* out, int rows, const Pass&) override {
        backend_.layer_norm(in, out, xhat_.data(), inverse_std_.data(), p, p + cols_, rows, cols_, kEpsilon);
    }
    void backward(const float* p, const float*, const float*, float* dout, float* din, float* g, int rows) override {
        const std::size_t n = std::size_t(rows) * cols_;
        backend_.multiply(scratch_.data(), dout, xhat_.data(), n);
        backend_.column_sums(g, scratch_.data(), rows, cols_);  // d gamma = sum over rows of dout * xhat
        backend_.column_sums(g + cols_, dout, rows, cols_);     // d beta = sum over rows of dout
        if (din) backend_.layer_norm_backward(dout, xhat_.data(), inverse_std_.data(), p, din, rows, cols_);
    }

private:
    static constexpr float kEpsilon = 1e-5f;  // PyTorch's default
    Backend& backend_;
    Shape shape_;
    int cols_;
    DeviceBuffer<float> xhat_, scratch_, inverse_std_;
};

}  // namespace

std::unique_ptr<Layer> make_layer_norm(Backend& b, Shape in) { return std::make_unique<LayerNorm>(b, in); }
std::unique_ptr<Layer> make_dense(Backend& b, Shape in, int outputs, bool relu) {
    return std::make_unique<Dense>(b, in, outputs, relu);
}
std::unique_ptr<Layer> make_conv(Backend& b, Shape in, int filters, int kh, int kw, int stride, int pad, bool relu) {
    return std::make_unique<Conv>(b, in, filters, kh, kw, stride, pad, relu);
}
std::unique_ptr<Layer> make_maxpool(Backend& b, Shape in, int size) { return std::make_unique<MaxPool>(b, in, size); }
std::unique_ptr<Layer> make_relu(Backend& b, Shape in) { return std::make_unique<Relu>(b, in); }
std::unique_ptr<Layer> make_dropout(Backend& b, Shape in, float rate) { return std::make_unique<Dropout>(b, in, rate); }

}  // namespace tether
