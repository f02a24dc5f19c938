// The Strategy object and center rules of the synchronous family (averaging, easgd): the
// center collects one x_i per live worker, then answers everyone at once.
#pragma once

#include "algorithms/elastic.hpp"

namespace tether {

class SynchronousStrategy final : public Strategy {
public:
    enum class Kind { averaging, easgd };
    SynchronousStrategy(Kind kind, int window, double alpha) : kind_(kind), window_(window), alpha_(alpha) {}
    int communication_window() const override { return window_; }
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const override;
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext& context) const override;
    // The worker sends x_i; the center answers x~ (the new one, or easgd's x~_old).
    WireKinds wire_kinds() const override { return {WireVector::state, WireVector::state}; }

private:
    Kind kind_;
    int window_;
    double alpha_;  // easgd only
};

}  // namespace tether
