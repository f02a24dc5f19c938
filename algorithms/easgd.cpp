// Synchronous EASGD (Zhang, Choromanska, LeCun, NIPS 2015, eqs. 5-6).
//   worker, every tau steps:  send x_i;  when the round closes receive x~_old;
//                             x_i <- x_i - alpha (x_i - x~_old)
//   center, round close:      x~ <- x~ + alpha sum_i (x_i - x~_old)
// The center's step is x~ <- (1 - beta) x~ + beta mean_i(x_i) with beta = N alpha. The paper
// keeps beta < 1; beta >= 1 (x~ lands on or past the workers' mean) is refused unless
// allow_unstable. Defaults: communication_window 10, moving_rate 0.9 / N, allow_unstable false.
#include <cmath>
#include <string>
#include <vector>

#include "algorithms/builtin.hpp"
#include "algorithms/send_parameters.hpp"

namespace tether {
namespace {

// x_i <- x_i - alpha (x_i - x~_old), as (1 - alpha) x_i + alpha x~_old.
class EasgdWorker final : public SendParametersWorker {
public:
    EasgdWorker(std::size_t size, float alpha) : SendParametersWorker(size), alpha_(alpha) {}
    void apply_reply(VectorOps& ops, float* x, const float* reply_host) override {
        const float* reply = on_device(ops, reply_host);
        ops.scale(x, size(), 1.f - alpha_);
        ops.axpy(x, reply, size(), alpha_);
    }

private:
    float alpha_;
};

// The round's sum_i (x_i - x~_old) in float (small numbers: RoundSum's reasoning); at its close
// x~ <- x~ + alpha sum, reply x~_old.
class EasgdCenter final : public SynchronousCenterRule {
public:
    explicit EasgdCenter(float alpha) : alpha_(alpha) {}
    bool takes_ranges() const override { return true; }
    void contribute(CenterState& center, const Exchange& e) override {
        if (pull_.empty()) pull_.assign(center.x.size(), 0.f);
        float* pull = pull_.data() + e.offset;
        const float* x = center.x.data() + e.offset;
        for (std::size_t i = 0; i < e.size; ++i) pull[i] += e.payload[i] - x[i];
    }
    double close_round(CenterState& center, float* reply) override {
        double moved = 0;
        for (std::size_t i = 0; i < pull_.size(); ++i) {
            const float step = float(alpha_ * pull_[i]);
            reply[i] = center.x[i];
            center.x[i] += step;
            moved += double(step) * step;
        }
        pull_.assign(pull_.size(), 0.f);
        return std::sqrt(moved);
    }

private:
    float alpha_;
    std::vector<float> pull_;
};

// x_i out, x~_old back: both states (SendParametersWorker's wire kinds).
using Easgd = RulePair<EasgdWorker, EasgdCenter>;

}  // namespace

std::shared_ptr<const Strategy> make_easgd(StrategyOptions& options, const StrategyContext& context) {
    const int window = options.communication_window(10);
    const double alpha = read_moving_rate(options, context);
    // For experiments that look for where synchronous EASGD breaks (docs/strategies.md#easgd).
    const bool allow_unstable = options.boolean("allow_unstable", false);
    const double beta = alpha * double(context.workers);
    if (beta >= 1.0 && !allow_unstable)
        throw ConfigError(options.path_of("moving_rate") + ": " + std::to_string(alpha) + " with " +
                          std::to_string(context.workers) + " workers (cluster.workers) gives beta = N alpha = " +
                          std::to_string(beta) +
                          " >= 1: each round would put x~ on or past the workers' mean (Zhang et al. 2015 keep beta < 1, "
                          "0.9 in their experiments); use moving_rate < 1 / N, or set " + options.path_of("allow_unstable") +
                          ": true to run it anyway (docs/strategies.md#easgd)");
    return std::make_shared<Easgd>(window, options.landing(window), EasgdCenter(float(alpha)), float(alpha));
}

}  // namespace tether
