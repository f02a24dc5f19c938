#include "algorithms/accumulated_update.hpp"


namespace tether {
namespace {

class StalenessDampedCenter final : public AccumulatingCenter {
    float damping(std::uint64_t staleness) const override { return 1.f / float(staleness + 1); }
};

}  // namespace

std::shared_ptr<const Strategy> make_accumulated_update(AccumulatedUpdateStrategy::Kind kind, JsonReader& block) {
    const CommonStrategyOptions common = read_common_options(block, 5);
    return std::make_shared<AccumulatedUpdateStrategy>(kind, common.communication_window);
}

std::string AccumulatedUpdateStrategy::name() const {
    switch (kind_) {
        case Kind::downpour: return "downpour";
        case Kind::adag: return "adag";
        case Kind::dynsgd: return "dynsgd";
    }
    return "?";
}

nlohmann::json AccumulatedUpdateStrategy::describe() const {
    return {{"name", name()}, {"communication_window", window_}};
}

std::unique_ptr<WorkerRule> AccumulatedUpdateStrategy::make_worker_rule(const StrategyContext& c) const {
    return std::make_unique<PullPushWorker>(c.num_parameters, kind_ == Kind::adag ? window_ : 0);
}

std::unique_ptr<CenterRule> AccumulatedUpdateStrategy::make_center_rule(const StrategyContext&) const {
    if (kind_ == Kind::dynsgd) return std::make_unique<StalenessDampedCenter>();
    return std::make_unique<AccumulatingCenter>();
}

}  // namespace tether
