// The strategies tether ships. Each is one file, algorithms/<name>.cpp, which opens with its rule,
// its source and its defaults, and holds the rules of its own, its RulePair (<tether/strategy.hpp>:
// one line where it pairs halves that exist) and its factory, declared here. They are registered like a user's own strategy would be
// (src/strategy/registry.cpp reads builtin_strategies() first). Adding one: its file, its
// factory here, one line in builtin.cpp, and the .cpp in meson.build.
#pragma once

#include <tether/strategy.hpp>

#include <memory>
#include <vector>

namespace tether {

std::shared_ptr<const Strategy> make_averaging(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_easgd(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_aeasgd(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_eamsgd(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_downpour(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_adag(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_dynsgd(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_adag_staleness(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_diloco(StrategyOptions& options, const StrategyContext& context);
std::shared_ptr<const Strategy> make_async_diloco(StrategyOptions& options, const StrategyContext& context);

struct BuiltinStrategy {
    const char* name;
    const char* summary;
    std::shared_ptr<const Strategy> (*make)(StrategyOptions& options, const StrategyContext& context);
};

const std::vector<BuiltinStrategy>& builtin_strategies();

}  // namespace tether
