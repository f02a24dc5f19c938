// Local optimizers: what each worker runs on its own minibatches, between exchanges.
//   sgd:       x <- x - lr g
//   nesterov:  u <- mu u - lr g;  x <- x + mu u - lr g     (Sutskever et al., ICML 2013)
//   adam:      m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;
//              x <- x - lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)   (Kingma & Ba, ICLR 2015)
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace tether {

class Optimizer {
public:
    explicit Optimizer(std::size_t size) : size_(size) {}
    virtual ~Optimizer() = default;
    std::size_t size() const { return size_; }

    // One step over all parameters.
    void step(float* parameters, const float* gradient) {
        begin_step();
        update(parameters, gradient, 0, size_);
    }
    // The same step in parts, so that several threads can share it (every update is element by
    // element): begin_step() once, then update() over disjoint ranges that together cover
    // [0, size()), possibly at the same time from different threads.
    virtual void begin_step() {}
    // Multiplies the learning rate of the steps that follow (LearningRateSchedule::scale), 1 by default.
    void set_learning_rate_scale(float scale) { learning_rate_scale_ = scale; }
    virtual void update(float* parameters, const float* gradient, std::size_t begin, std::size_t end) = 0;

protected:
    float learning_rate_scale_ = 1;

private:
    std::size_t size_;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, Backend& backend, std::size_t size);

}  // namespace tether
