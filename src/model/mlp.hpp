// Multilayer perceptron: affine layers with ReLU between them and a softmax cross-entropy
// head. Parameters are laid out layer after layer as W (fan_in x fan_out, row-major) then b.
#pragma once

#include <vector>

#include "backend/backend.hpp"
#include "model/model.hpp"

namespace tether {

class Mlp final : public Model {
public:
    // sizes = {inputs, hidden..., classes}; needs at least an input and an output size.
    Mlp(Backend& backend, std::vector<std::size_t> sizes);

    std::size_t num_parameters() const override { return num_parameters_; }
    std::string description() const override;
    std::vector<std::size_t> layer_sizes() const override { return sizes_; }
    // He initialization (weights ~ N(0, 2 / fan_in), biases 0), from `seed` alone.
    void initialize(float* host_parameters, std::uint64_t seed) const override;

    double evaluate_with_gradient(const float* parameters, const Batch& batch, float* gradient) override;
    double evaluate(const float* parameters, const Batch& batch, std::int32_t* classes = nullptr) override;

private:
    std::size_t layers() const { return sizes_.size() - 1; }
    const float* weights(const float* p, std::size_t l) const { return p + offsets_[l]; }
    const float* bias(const float* p, std::size_t l) const { return p + offsets_[l] + sizes_[l] * sizes_[l + 1]; }
    // Leaves the logits in activations_.back(); activations_[l] holds layer l+1's output.
    void forward(const float* parameters, const float* inputs, int rows);
    void reserve(int rows);

    Backend& backend_;
    std::vector<std::size_t> sizes_;
    std::vector<std::size_t> offsets_;
    std::size_t num_parameters_ = 0;
    int capacity_rows_ = 0;
    std::vector<DeviceBuffer<float>> activations_;  // one per layer
    std::vector<DeviceBuffer<float>> deltas_;       // d(loss)/d(pre-activation), one per layer
};

}  // namespace tether
