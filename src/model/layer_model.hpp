// A model built from `model.layers` (docs/models.md): a stack of layers (model/layers.hpp)
// with a softmax cross-entropy head on the last one. Parameters are one buffer, layer after
// layer, so strategies see one flat vector as with the MLP.
#pragma once

#include <memory>
#include <vector>

#include "model/layer_spec.hpp"
#include "model/layers.hpp"
#include "model/model.hpp"

namespace tether {

class LayerModel final : public Model {
public:
    // `input` is one sample's shape (flat data is features x 1 x 1). Throws ConfigError when a
    // layer does not fit the shape it receives, or the last layer is not `dense <classes>`.
    // `noise_seed` drives the dropout masks (each worker passes its own).
    LayerModel(Backend& backend, const std::vector<LayerSpec>& specs, Shape input, int classes,
               std::uint64_t noise_seed);

    std::size_t num_parameters() const override { return num_parameters_; }
    std::string description() const override;
    // Per layer: a hash of its text and its output size, so the fingerprint covers the model.
    std::vector<std::size_t> layer_sizes() const override;
    void initialize(float* host_parameters, std::uint64_t seed) const override;

    double evaluate_with_gradient(const float* parameters, const Batch& batch, float* gradient) override;
    double evaluate(const float* parameters, const Batch& batch, std::int32_t* classes = nullptr) override;

private:
    void reserve(int rows);
    // Leaves the logits in activations_.back().
    void forward(const float* parameters, const float* inputs, int rows, const Pass& pass);

    Backend& backend_;
    Shape input_;
    int classes_;
    std::uint64_t noise_seed_;
    std::uint64_t draws_ = 0;  // training passes so far: each gets fresh dropout masks
    std::vector<std::string> texts_;  // one per built layer (a fused ReLU joins its layer's text)
    std::vector<std::unique_ptr<Layer>> layers_;
    std::vector<std::size_t> offsets_;
    std::size_t num_parameters_ = 0;
    int capacity_rows_ = 0;
    std::vector<DeviceBuffer<float>> activations_;  // layer l's output
    std::vector<DeviceBuffer<float>> gradients_;    // d(loss)/d(layer l's output)
};

}  // namespace tether
