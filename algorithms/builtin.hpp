// The strategies tether ships, by name. They are registered like a user's own strategy would be
// (src/strategy/registry.cpp reads this list first). Adding one: its pair of files here, one
// line in builtin.cpp, and the .cpp in meson.build.
#pragma once

#include <tether/strategy.hpp>

#include <vector>

namespace tether {

struct BuiltinStrategy {
    const char* name;
    const char* summary;
    std::shared_ptr<const Strategy> (*make)(StrategyOptions& options, const StrategyContext& context);
};

const std::vector<BuiltinStrategy>& builtin_strategies();

}  // namespace tether
