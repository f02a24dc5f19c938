#include "algorithms/adag_staleness.hpp"

#include <cmath>
#include <unordered_map>

#include "algorithms/pull_push.hpp"

namespace tether {
namespace {

class StalenessScaledCenter final : public AsynchronousCenterRule {
public:
    explicit StalenessScaledCenter(float gamma) : inverse_gamma_(1.f / gamma) {}

    void on_join(const CenterState& center, std::uint32_t worker_id) override { pulled_[worker_id] = center.x; }
    void on_leave(std::uint32_t worker_id) override { pulled_.erase(worker_id); }

    double apply(CenterState& center, const Exchange& e, float* reply) override {
        // A worker the center never welcomed (a rule driven by hand) pulled x~ as it is now.
        auto [entry, fresh] = pulled_.try_emplace(e.worker_id);
        if (fresh) entry->second = center.x;
        float* pulled = entry->second.data();
        float* x = center.x.data();
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

class AdagStalenessStrategy final : public Strategy {
public:
    AdagStalenessStrategy(int window, double gamma) : window_(window), gamma_(gamma) {}
    int communication_window() const override { return window_; }
    // The worker half is ADAG's: the accumulated update divided by the window.
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& c) const override {
        return std::make_unique<PullPushWorker>(c.num_parameters, window_);
    }
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext&) const override {
        return center_rule<StalenessScaledCenter>(float(gamma_));
    }
    WireKinds wire_kinds() const override { return {WireVector::update, WireVector::state}; }

private:
    int window_;
    double gamma_;
};

}  // namespace

std::shared_ptr<const Strategy> make_adag_staleness(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(5);
    const double gamma = options.number("gamma", 1e-4, 0.0, 1e6, true);
    return std::make_shared<AdagStalenessStrategy>(window, gamma);
}

}  // namespace tether
