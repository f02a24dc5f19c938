// EAMSGD, elastic averaging with Nesterov momentum (Zhang, Choromanska, LeCun, NIPS 2015,
// Algorithm 2).
//   worker local step:        u <- delta u - eta grad f(x_i + delta u);  x_i <- x_i + u
//   worker, every tau steps:  send x_i;  receive e;  x_i <- x_i - e
//   center, on receipt:       e = alpha (x_i - x~);  x~ <- x~ + e;  reply e
// The local optimizer must be Nesterov (its momentum is delta): training.optimizer.name =
// "nesterov" in a config file, checked by the config layer; the embedding user's own otherwise.
// Defaults: communication_window 10, moving_rate 0.9 / N.
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_eamsgd(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
