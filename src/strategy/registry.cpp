#include "strategy/registry.hpp"

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
        const ExchangeSchedule schedule = strategy->exchange_schedule();
        const WireKinds kinds = strategy->wire_kinds();
        if (schedule.fragments < 1 || schedule.overlap_steps < 0 ||
            schedule.overlap_steps > strategy->communication_window() / schedule.fragments ||
            (schedule.mixing && !(*schedule.mixing >= 0.0 && *schedule.mixing < 1.0)))
            throw std::logic_error("strategy \"" + name + "\" has an exchange schedule of " +
                                   std::to_string(schedule.fragments) + " fragments and overlap_steps " +
                                   std::to_string(schedule.overlap_steps) + "; <tether/strategy.hpp> says what may be");
        if (schedule.streamed() && (kinds.payload != WireVector::state || kinds.reply != WireVector::state))
            throw std::logic_error("strategy \"" + name + "\" exchanges fragments or mixes, but its wire kinds are not state/state: "
                                   "tether takes a fragment's reply as the worker's new x there, which only a rule that "
                                   "sends x_i and takes x~ allows");
        return std::make_shared<ConfiguredStrategy>(name, std::move(strategy), options.description());
    }
    throw std::logic_error("unreachable: choice() rejected the unknown strategy name \"" + name + "\"");
}

}  // namespace tether
