// Synchronous EASGD (Zhang, Choromanska, LeCun, NIPS 2015, eqs. 5-6).
//   worker, every tau steps:  send x_i;  when the round closes receive x~_old;
//                             x_i <- x_i - alpha (x_i - x~_old)
//   center, round close:      x~ <- x~ + alpha sum_i (x_i - x~_old)
// The center's step is x~ <- (1 - beta) x~ + beta mean_i(x_i) with beta = N alpha. The paper
// keeps beta < 1; beta >= 1 (x~ lands on or past the workers' mean) is refused unless
// allow_unstable. Defaults: communication_window 10, moving_rate 0.9 / N, allow_unstable false.
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_easgd(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
