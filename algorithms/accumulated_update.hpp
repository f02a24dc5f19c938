// The Strategy object shared by downpour, adag and dynsgd; they differ only in the payload's
// scale (worker) and the damping (center).
#pragma once

#include "algorithms/pull_push.hpp"

namespace tether {

class AccumulatedUpdateStrategy final : public Strategy {
public:
    enum class Kind { downpour, adag, dynsgd };
    AccumulatedUpdateStrategy(Kind kind, int window) : kind_(kind), window_(window) {}

    int communication_window() const override { return window_; }
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const override;
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext& context) const override;
    // The worker sends its accumulated update; the center answers x~.
    WireKinds wire_kinds() const override { return {WireVector::update, WireVector::state}; }

private:
    Kind kind_;
    int window_;
};

// Reads the family's one key, communication_window (default 5).
std::shared_ptr<const Strategy> make_accumulated_update(AccumulatedUpdateStrategy::Kind kind, StrategyOptions& options);

}  // namespace tether
