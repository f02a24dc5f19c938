// DiLoCo, distributed low-communication training (Douillard et al., "DiLoCo: Distributed
// Low-Communication Training of Language Models", 2023): H local steps of the local (inner)
// optimizer, then one synchronous round in which the center treats the mean change of the
// workers as a gradient and takes one step of an outer SGD with Nesterov momentum.
//   worker, every H = tau steps:  send x_i;  wait;  x_i <- x~
//   center, round close:          g = x~ - mean_i x_i            (the outer gradient)
//                                 v <- mu v + g
//                                 x~ <- x~ - lr (g + mu v)        (Nesterov; plain: x~ - lr v)
// With lr = 1 and mu = 0 this is x~ <- mean_i x_i: model averaging (a test checks it).
// Defaults: communication_window 10, outer_learning_rate 0.7, outer_momentum 0.9, nesterov
// true (the paper's outer optimizer; it trains with H = 500 inner steps of AdamW).
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_diloco(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
