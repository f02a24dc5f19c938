// The 1-worker reference: no center, no exchange; the local optimizer alone.
#pragma once

#include <memory>

#include "algorithms/strategy.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_sequential(JsonReader& block, const RunConfig& config);

}  // namespace tether
