// Strategy names -> factories. Adding a strategy: its pair of files here and one line in
// registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/strategy.hpp"

namespace tether {

using StrategyFactory = std::shared_ptr<const Strategy> (*)(JsonReader& block, const RunConfig& config);

struct StrategyEntry {
    const char* name;
    const char* summary;
    StrategyFactory make;
};

const std::vector<StrategyEntry>& strategy_registry();
std::vector<std::string> strategy_names();

// Reads the `strategy` block's name and the chosen strategy's own keys.
std::shared_ptr<const Strategy> make_strategy(JsonReader& block, const RunConfig& config);

}  // namespace tether
