// What a CPU worker's threads run for one training step, whichever way they share it:
// train/batch_split.hpp splits the minibatch into row slices, train/layer_split.hpp splits
// each layer's weights into blocks of rows. LocalTrainer drives either through this face.
#pragma once

#include <cstddef>
#include <functional>

#include "model/model.hpp"

namespace tether {

class ThreadedGradient {
public:
    virtual ~ThreadedGradient() = default;
    // Threads this split runs on (slices or layer blocks).
    virtual int parts() const = 0;

    // Fills part of the batch's buffers: rows [row_begin, row_end), features [feature_begin,
    // feature_end) of each, and those rows' labels when `labels`. Several threads may call it
    // at once for disjoint parts.
    using BatchFill = std::function<void(std::size_t row_begin, std::size_t row_end, std::size_t feature_begin,
                                         std::size_t feature_end, bool labels)>;
    // Runs the forward and backward pass over the batch; returns the batch's mean loss. With a
    // `fill`, the batch's buffers are filled first, each thread the part it reads, rather
    // than by the caller alone while the others wait (1-2% faster on the default job).
    virtual double compute(const float* parameters, const Batch& batch, float* gradient, const BatchFill& fill) = 0;
    // Then: completes `gradient` (host memory) and calls then(begin, end) over disjoint
    // ranges covering every parameter, each on the thread whose cache holds that range (the
    // optimizer's update), when `then` is not null.
    using RangeWork = std::function<void(std::size_t begin, std::size_t end)>;
    virtual void finish(float* gradient, const RangeWork& then) = 0;

    // compute() and finish() with nothing after: the batch's mean loss and gradient.
    double evaluate_with_gradient(const float* parameters, const Batch& batch, float* gradient) {
        const double loss = compute(parameters, batch, gradient, nullptr);
        finish(gradient, nullptr);
        return loss;
    }
};

}  // namespace tether
