// DynSGD (Jiang, Cui, Zhang, Yu, "Heterogeneity-aware Distributed Parameter Servers",
// SIGMOD 2017): staleness-aware damping of accumulated updates.
//   worker, every tau steps:  send  D = x_i - x_pull  and v_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       x~ <- x~ + D / (v - v_pull + 1);  reply x~
// v is the center's version (updates applied). Defaults: communication_window 5.
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_dynsgd(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
