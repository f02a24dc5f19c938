// The Model seam. Parameters are one contiguous float buffer in backend memory, so a
// strategy sees one flat vector whatever the architecture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tether {

// A minibatch already in backend memory.
struct Batch {
    const float* inputs = nullptr;        // rows x input features, row-major
    const std::int32_t* labels = nullptr;  // rows
    int rows = 0;
};

class Model {
public:
    virtual ~Model() = default;

    virtual std::size_t num_parameters() const = 0;
    // Human-readable architecture, e.g. "mlp 784-256-128-10".
    virtual std::string description() const = 0;
    // Layer sizes; part of the fingerprint that the center checks on join.
    virtual std::vector<std::size_t> layer_sizes() const = 0;
    // Seeded initial parameters, written to a host buffer of num_parameters() floats.
    virtual void initialize(float* host_parameters, std::uint64_t seed) const = 0;

    // Mean loss over the batch; writes its gradient (num_parameters() floats) into `gradient`.
    virtual double evaluate_with_gradient(const float* parameters, const Batch& batch, float* gradient) = 0;
    // Mean loss over the batch, without the gradient; also writes each row's predicted class
    // into `classes` (backend memory) when it is not null.
    virtual double evaluate(const float* parameters, const Batch& batch, std::int32_t* classes = nullptr) = 0;
};

}  // namespace tether
