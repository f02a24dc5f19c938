// ADAG / AGN, accumulated gradient normalization (Hermans, Spanakis, Moeckel, "Accumulated
// Gradient Normalization", ACML 2017).
//   worker, every tau steps:  send  D / tau  with D = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       x~ <- x~ + D / tau;  reply x~
// Dividing by tau makes each commit the *mean* local update, so N workers together move x~
// like one worker with an N-times larger minibatch; with tau = 1 it equals DOWNPOUR.
// Defaults: communication_window 5.
#pragma once

#include <memory>

#include "algorithms/strategy.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_adag(JsonReader& block, const RunConfig& config);

}  // namespace tether
