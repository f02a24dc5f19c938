// Asynchronous EASGD (Zhang, Choromanska, LeCun, "Deep learning with Elastic Averaging SGD",
// NIPS 2015, Algorithm 1).
//   worker, every tau steps:  send x_i;  receive e;  x_i <- x_i - e
//   center, on receipt:       e = alpha (x_i - x~);  x~ <- x~ + e;  reply e
// The center computes e from its current x~ and both sides apply the same e in one round
// trip, so the elastic force stays symmetric. Defaults: communication_window 10,
// moving_rate alpha = 0.9 / N (beta = N alpha = 0.9, the paper's choice).
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_aeasgd(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
