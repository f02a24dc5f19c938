// Staleness-aware ADAG (Hermans, "On the Scalability of Asynchronous Data Parallel
// Optimization", Maastricht University, 2017): ADAG's commits, each scaled on the center,
// element by element, by how far x~ has moved since the committing worker pulled it.
//   worker, every tau steps:  send D / tau  with D = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       s_j = 1 / ((x~_j - x~pull_j)^2 / gamma + 1)  for every element j
//                             x~_j <- x~_j + s_j (D / tau)_j;  reply x~
// An element that did not move since the worker's pull takes the commit whole (s = 1, plain
// ADAG); one that moved by sqrt(gamma) takes half of it. The center keeps each live worker's
// pulled x~ (the reply it last sent it), so memory is bounded by workers x parameters.
// Defaults: communication_window 5, gamma 1e-4 (with Adam at lr 1e-3 an element moves up to
// ~1e-3 per commit: an element moved by 0.01 since the pull, about ten full commits, is halved).
#pragma once

#include <memory>

#include <tether/strategy.hpp>

namespace tether {

std::shared_ptr<const Strategy> make_adag_staleness(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
