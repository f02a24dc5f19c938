// Synchronous model averaging (parameter averaging every tau steps; McDonald et al. 2010,
// Zhang et al. 2015 as the alpha = 1/N limit of EASGD).
//   worker, every tau steps:  send x_i;  wait;  x_i <- x~
//   center, round close:      x~ <- mean of the x_i received
// Defaults: communication_window 10.
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_averaging(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
