// DynSGD (Jiang, Cui, Zhang, Yu, "Heterogeneity-aware Distributed Parameter Servers",
// SIGMOD 2017): staleness-aware damping of accumulated updates.
//   worker, every tau steps:  send  D = x_i - x_pull  and v_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       x~ <- x~ + D / (v - v_pull + 1);  reply x~
// v is the center's version (updates applied). Defaults: communication_window 5.
#include <algorithm>

#include "algorithms/builtin.hpp"
#include "algorithms/pull_push.hpp"

namespace tether {
namespace {

class DynsgdCenter final : public AsynchronousCenterRule {
public:
    bool takes_ranges() const override { return true; }
    // A range's staleness: the versions x~ moved since the pull when the range lands.
    double apply(CenterState& center, const Exchange& e, float* reply) override {
        const std::uint64_t staleness = center.version - std::min(center.version, e.pull_version);
        return accumulate(center, e, 1.f / float(staleness + 1), reply);
    }
};

// DOWNPOUR's worker (v_pull travels in every exchange, as it does for every strategy).
using Dynsgd = RulePair<PullPushWorker, DynsgdCenter>;

}  // namespace

std::shared_ptr<const Strategy> make_dynsgd(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(5);
    return std::make_shared<Dynsgd>(window, options.landing(window));
}

}  // namespace tether
