// The layers of a LayerModel (model/layer_model.hpp). Activations are batches of images in
// NHWC order (the channels of one pixel contiguous); a flat vector is 1 x 1 x features, so a
// dense layer reads any shape as one row per sample. Each layer owns a slice of the model's
// one parameter buffer and computes on the Backend only, so CPU and CUDA share this code.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "backend/backend.hpp"

namespace tether {

// One sample's shape: height x width pixels of `channels` values each.
struct Shape {
    int channels = 1, height = 1, width = 1;
    std::size_t size() const { return std::size_t(channels) * height * width; }
    std::string text() const {
        return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
    }
};

// What a forward pass is for: training passes apply dropout, with masks drawn from `seed`.
struct Pass {
    bool training = false;
    std::uint64_t seed = 0;
};

class Layer {
public:
    virtual ~Layer() = default;

    virtual Shape output_shape() const = 0;
    virtual std::size_t num_parameters() const { return 0; }
    // Writes this layer's initial parameters (num_parameters() floats) to `host`.
    virtual void initialize(float* /*host*/, std::mt19937_64& /*rng*/) const {}
    // Sizes the layer's scratch (im2col columns, pooling winners, dropout mask) for `rows`.
    virtual void reserve(int /*rows*/) {}

    // `parameters` is this layer's slice; `out` holds rows x output_shape().size().
    virtual void forward(const float* parameters, const float* in, float* out, int rows, const Pass& pass) = 0;
    // Given dout = d(loss)/d(out) (which the layer may overwrite), writes this layer's
    // parameter gradient into `gradient` and, unless `din` is null, d(loss)/d(in) into `din`.
    virtual void backward(const float* parameters, const float* in, const float* out, float* dout, float* din,
                          float* gradient, int rows) = 0;
};

// Affine map of the flattened input to `outputs` values, W (fan_in x outputs) then b; with
// `relu` the ReLU is fused into the bias pass.
std::unique_ptr<Layer> make_dense(Backend& backend, Shape in, int outputs, bool relu);
// Convolution of `filters` kernels, by im2col and one GEMM per batch: W (kernel_h * kernel_w *
// in channels x filters) then b, the layout that makes the convolution a dense layer over the
// im2col rows.
std::unique_ptr<Layer> make_conv(Backend& backend, Shape in, int filters, int kernel_h, int kernel_w, int stride,
                                 int pad, bool relu);
std::unique_ptr<Layer> make_maxpool(Backend& backend, Shape in, int size);
std::unique_ptr<Layer> make_relu(Backend& backend, Shape in);
// Drops each value with probability `rate` while training (inverted dropout: survivors are
// scaled by 1 / (1 - rate), so evaluation is the identity).
std::unique_ptr<Layer> make_dropout(Backend& backend, Shape in, float rate);
// Normalises each sample over all its values (Ba et al., 2016; no batch statistics, so it
// behaves the same in training and evaluation), then scales and shifts each value: gamma
// (initially 1) then beta (initially 0), one per value of the sample.
std::unique_ptr<Layer> make_layer_norm(Backend& backend, Shape in);

}  // namespace tether
