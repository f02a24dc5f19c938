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
    virtual ~Optimizer() = default;
    virtual void step(float* parameters, const float* gradient) = 0;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, Backend& backend, std::size_t size);

}  // namespace tether
