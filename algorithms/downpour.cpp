// DOWNPOUR (Dean et al., "Large Scale Distributed Deep Networks", NIPS 2012).
//   worker, every tau steps:  send  D = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       x~ <- x~ + D;  reply x~
// Defaults: communication_window 5. Each worker's whole accumulated update lands on x~, so
// the effective step grows with N and staleness: it is the baseline ADAG and DynSGD fix.
#include "algorithms/builtin.hpp"
#include "algorithms/pull_push.hpp"

namespace tether {

using Downpour = RulePair<PullPushWorker, AccumulatingCenter>;

std::shared_ptr<const Strategy> make_downpour(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(5);
    return std::make_shared<Downpour>(window, options.landing(window));
}

}  // namespace tether
