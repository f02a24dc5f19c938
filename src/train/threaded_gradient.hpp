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

    // Fills part of a batch: features [feature_begin, feature_end) of rows [row_begin,
    // row_end), and those rows' labels (into the batch's label buffer) when `labels`. The
    // features go into the batch's own input buffer, in place, when `images` is null; else row
    // r's at images + (r - row_begin) * stride (a thread's buffer of its block of features).
    // Several threads may call it at once for disjoint parts.
    using BatchFill = std::function<void(std::size_t row_begin, std::size_t row_end, std::size_t feature_begin,
                                         std::size_t feature_end, float* images, std::size_t stride, bool labels)>;
    // Runs the forward and backward pass over the batch; returns the batch's mean loss. With a
    // `fill`, the batch's buffers are filled first, each thread the part it reads, rather
    // than by the caller alone while the others wait (a little faster; experiments/README.md).
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
