// Strategy names -> factories: "sequential", the built-ins (algorithms/builtin.hpp), then what
// register_strategy() (<tether/strategy.hpp>) added. The config parser and the embedding API
// both build strategies here, so a registered strategy works in both.
#pragma once

#include <tether/strategy.hpp>

#include <memory>
#include <string>
#include <vector>

#include "strategy/configured_strategy.hpp"
#include "util/json_reader.hpp"

namespace tether {

struct StrategyEntry {
    std::string name;
    std::string summary;
    StrategyFactory make;  // empty for "sequential"
};

// A copy of the table as it is now (registrations may come from any thread).
std::vector<StrategyEntry> strategy_entries();

// Reads `name` from the block, then the chosen strategy's own keys through its factory. The
// caller finishes the block (unknown keys) afterwards.
std::shared_ptr<const ConfiguredStrategy> make_strategy(JsonReader& block, const StrategyContext& context);

}  // namespace tether
