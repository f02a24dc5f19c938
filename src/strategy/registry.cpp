#include "strategy/registry.hpp"

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "algorithms/builtin.hpp"
#include "strategy/strategy_options.hpp"

namespace tether {
namespace {

struct Registry {
    std::mutex mutex;
    std::vector<StrategyEntry> entries;

    Registry() {
        entries.push_back({"sequential", "one worker, no center: the reference", nullptr});
        for (const auto& b : builtin_strategies()) entries.push_back({b.name, b.summary, b.make});
    }
};

Registry& registry() {
    static Registry r;
    return r;
}

bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
    return true;
}

// What <tether/exchange_policy.hpp> promises the worker, checked once where a strategy is made: a
// plugin's policy that breaks it is a programming error, named with its strategy.
void check_exchange_policy(const std::string& name, const Strategy& strategy, const StrategyContext& context) {
    const std::unique_ptr<ExchangePolicy> policy = strategy.make_exchange_policy(context);
    if (!policy) throw std::logic_error("strategy \"" + name + "\" made no exchange policy");
    const Landing landing = policy->landing();
    const int window = policy->window();
    const int gap = window / int(std::max<std::size_t>(policy->fragments(), 1));
    if (window < 1 || landing.after_steps < 0 || landing.after_steps > gap)
        throw std::logic_error("strategy \"" + name + "\" has an exchange policy with window " + std::to_string(window) + ", " +
                               std::to_string(policy->fragments()) + " fragments and replies landing after " +
                               std::to_string(landing.after_steps) + " steps; <tether/exchange_policy.hpp> says what may be");
    if (landing.mixing && !(*landing.mixing >= 0.0 && *landing.mixing < 1.0))
        throw std::logic_error("strategy \"" + name + "\" mixes late replies with factor " + std::to_string(*landing.mixing) +
                               "; it must be in [0, 1)");
    if (landing.mixing && policy->fragments() == 0)
        throw std::logic_error("strategy \"" + name + "\" mixes replies into x but exchanges all of x through its rule; "
                               "mixing is for fragments (ExchangePolicy::fragments() >= 1)");
    const WireKinds kinds = strategy.wire_kinds();
    if (policy->fragments() > 0 && (kinds.payload != WireVector::state || kinds.reply != WireVector::state))
        throw std::logic_error("strategy \"" + name + "\" exchanges fragments, but its wire kinds are not state/state: "
                               "tether takes a fragment's reply as the worker's new x there, which only a rule that "
                               "sends x_i and takes x~ allows");
}

}  // namespace

void register_strategy(const std::string& name, const std::string& summary, StrategyFactory factory) {
    if (!valid_name(name))
        throw std::invalid_argument("register_strategy: name \"" + name +
                                    "\" must be 1 to 64 lower-case letters, digits, '-' or '_'");
    if (!factory) throw std::invalid_argument("register_strategy(\"" + name + "\"): the factory is empty");
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const auto& e : r.entries)
        if (e.name == name)
            throw std::invalid_argument("register_strategy: \"" + name + "\" is already a strategy (" + e.summary +
                                        "); pick another name");
    r.entries.push_back({name, summary, std::move(factory)});
}

std::vector<StrategyEntry> strategy_entries() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return r.entries;
}

std::vector<std::string> strategy_names() {
    std::vector<std::string> names;
    for (const auto& e : strategy_entries()) names.push_back(e.name);
    return names;
}

std::shared_ptr<const ConfiguredStrategy> make_strategy(JsonReader& block, const StrategyContext& context) {
    const std::vector<StrategyEntry> entries = strategy_entries();
    std::vector<std::string> names;
    for (const auto& e : entries) names.push_back(e.name);
    const std::string name = block.choice("name", "sequential", names);
    for (const auto& e : entries) {
        if (name != e.name) continue;
        if (!e.make) return std::make_shared<ConfiguredStrategy>(name, nullptr, block.resolved());
        JsonStrategyOptions options(block);
        std::shared_ptr<const Strategy> strategy = e.make(options, context);
        if (!strategy)
            throw std::logic_error("the factory of strategy \"" + name + "\" returned no strategy");
        if (strategy->communication_window() < 1)
            throw std::logic_error("strategy \"" + name + "\" has communication_window " +
                                   std::to_string(strategy->communication_window()) + "; it must be at least 1");
        check_exchange_policy(name, *strategy, context);
        return std::make_shared<ConfiguredStrategy>(name, std::move(strategy), options.description());
    }
    throw std::logic_error("unreachable: choice() rejected the unknown strategy name \"" + name + "\"");
}

}  // namespace tether
