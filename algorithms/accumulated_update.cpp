#include "algorithms/accumulated_update.hpp"

namespace tether {
namespace {

class StalenessDampedCenter final : public AccumulatingCenter {
    float damping(std::uint64_t staleness) const override { return 1.f / float(staleness + 1); }
};

}  // namespace

std::shared_ptr<const Strategy> make_accumulated_update(AccumulatedUpdateStrategy::Kind kind, StrategyOptions& options) {
    return std::make_shared<AccumulatedUpdateStrategy>(kind, options.communication_window(5));
}

std::unique_ptr<WorkerRule> AccumulatedUpdateStrategy::make_worker_rule(const StrategyContext& c) const {
    return std::make_unique<PullPushWorker>(c.num_parameters, kind_ == Kind::adag ? window_ : 0);
}

std::unique_ptr<CenterRule> AccumulatedUpdateStrategy::make_center_rule(const StrategyContext&) const {
    if (kind_ == Kind::dynsgd) return center_rule<StalenessDampedCenter>();
    return center_rule<AccumulatingCenter>();
}

}  // namespace tether
