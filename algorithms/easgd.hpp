// Synchronous EASGD (Zhang, Choromanska, LeCun, NIPS 2015, eqs. 5-6).
//   worker, every tau steps:  send x_i;  when the round closes receive x~_old;
//                             x_i <- x_i - alpha (x_i - x~_old)
//   center, round close:      x~ <- x~ + alpha sum_i (x_i - x~_old)
// Stable for beta = N alpha < 1. Defaults: communication_window 10, moving_rate 0.9 / N.
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_easgd(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
