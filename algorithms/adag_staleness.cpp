// Staleness-aware ADAG (the experimental parameter server of dist-keras, J. Hermans, CERN,
// 2017; not in the ADAG paper, ACML 2017, which has no staleness term): ADAG's commits, each
// scaled on the center, element by element, by how far x~ has moved since the committing
// worker pulled it.
//   worker, every tau steps:  send D / tau  with D = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       s_j = 1 / ((x~_j - x~pull_j)^2 / gamma + 1)  for every element j
//                             x~_j <- x~_j + s_j (D / tau)_j;  reply x~
// An element that did not move since the worker's pull takes the commit whole (s = 1, plain
// ADAG); one that moved by sqrt(gamma) takes half of it. The center keeps each live worker's
// pulled x~ (the reply it last sent it), so memory is bounded by workers x parameters.
// Defaults: communication_window 5, gamma 1e-4 (with Adam at lr 1e-3 an element moves up to
// ~1e-3 per commit: an element moved by 0.01 since the pull, about ten full commits, is halved).
#include <cmath>
#include <unordered_map>
#include <vector>

#include "algorithms/builtin.hpp"

namespace tether {
namespace {

class StalenessScaledCenter final : public AsynchronousCenterRule {
public:
    explicit StalenessScaledCenter(float gamma) : inverse_gamma_(1.f / gamma) {}

    void on_join(const CenterState& center, std::uint32_t worker_id) override { pulled_[worker_id] = center.x; }
    void on_leave(std::uint32_t worker_id) override { pulled_.erase(worker_id); }

    bool takes_ranges() const override { return true; }
    double apply(CenterState& center, const Exchange& e, float* reply) override {
        // A worker the center never welcomed (a rule driven by hand) pulled x~ as it is now.
        auto [entry, fresh] = pulled_.try_emplace(e.worker_id);
        if (fresh) entry->second = center.x;
        float* pulled = entry->second.data() + e.offset;
        float* x = center.x.data() + e.offset;
        double moved = 0;
        for (std::size_t j = 0; j < e.size; ++j) {
            const float drift = x[j] - pulled[j];
            const float step = e.payload[j] / (drift * drift * inverse_gamma_ + 1.f);
            moved += double(step) * step;
            const float updated = x[j] + step;
            x[j] = updated;
            reply[j] = updated;
            pulled[j] = updated;  // the reply is this worker's next pull
        }
        return std::sqrt(moved);
    }

private:
    float inverse_gamma_;
    std::unordered_map<std::uint32_t, std::vector<float>> pulled_;
};

// The worker half is ADAG's: the accumulated update divided by the window.
using AdagStaleness = RulePair<PullPushWorker, StalenessScaledCenter>;

}  // namespace

std::shared_ptr<const Strategy> make_adag_staleness(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(5);
    const double gamma = options.number("gamma", 1e-4, 0.0, 1e6, true);
    return std::make_shared<AdagStaleness>(window, options.landing(window), StalenessScaledCenter(float(gamma)), window);
}

}  // namespace tether
