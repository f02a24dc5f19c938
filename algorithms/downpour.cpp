// DOWNPOUR (Dean et al., "Large Scale Distributed Deep Networks", NIPS 2012).
//   worker, every tau steps:  send  D = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       x~ <- x~ + D;  reply x~
// Defaults: communication_window 5. Each worker's whole accumulated update lands on x~, so
// the effective step grows with N and staleness: it is the baseline ADAG and DynSGD fix.
#include "algorithms/builtin.hpp"
#include "algorithms/pull_push.hpp"

namespace tether {
namespace {

class Downpour final : public WindowedStrategy {
public:
    // The worker sends its accumulated update; the center answers x~.
    Downpour(int window, Landing landing) : WindowedStrategy(window, {WireVector::update, WireVector::state}, landing) {}
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& c) const override {
        return std::make_unique<PullPushWorker>(c.num_parameters, 0);
    }
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext&) const override {
        return center_rule<AccumulatingCenter>();
    }
};

}  // namespace

std::shared_ptr<const Strategy> make_downpour(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(5);
    return std::make_shared<Downpour>(window, options.landing(window));
}

}  // namespace tether
