// DiLoCo, distributed low-communication training (Douillard et al., "DiLoCo: Distributed
// Low-Communication Training of Language Models", 2023): H local steps of the local (inner)
// optimizer, then one synchronous round in which the center treats the mean change of the
// workers as a gradient and takes one step of an outer SGD with Nesterov momentum.
//   worker, every H = tau steps:  send x_i;  wait;  x_i <- x~
//   center, round close:          g = x~ - mean_i x_i            (the outer gradient)
//                                 v <- mu v + g
//                                 x~ <- x~ - lr (g + mu v)        (Nesterov; plain: x~ - lr v)
// With lr = 1 and mu = 0 this is x~ <- mean_i x_i: model averaging (a test checks it).
// Defaults: communication_window 10, outer_learning_rate 0.7, outer_momentum 0.9, nesterov
// true (the paper's outer optimizer; it trains with H = 500 inner steps of AdamW).
//
// Streaming DiLoCo (Douillard et al., "Streaming DiLoCo with overlapping communication:
// Towards a Distributed Free Lunch", 2025): `fragments` F splits x into F fragments, one per
// server (cluster.servers = F, each with its own rounds and outer momentum), and staggers them:
//   worker, after local step t, for each f with (t - floor(f H / F)) mod H = 0:
//                                  send x_i,f;  training goes on for d = overlap_steps steps;
//                                  x_i,f <- x~_f + (x_i,f(t + d) - x_i,f(t))
//   center (server f), round close: the outer step above, on fragment f alone.
// Each fragment is still exchanged once per H steps, so the bytes of a run are plain DiLoCo's,
// but a step sends at most 1/F of x: the peak falls F-fold. By default tether keeps the d
// local steps, as its overlapped exchanges do; `mixing` a merges as the paper does instead:
// x_i,f <- a x_i,f + (1 - a) x~_f (a = 0 takes x~_f and drops the d steps). The paper's 4-bit outer gradients: a worker's
// x_i,f crosses the wire as its change from the last reconstructed value under cluster.codec
// (int8, or int4 as the paper's 4 bits).
#include <cmath>
#include <string>
#include <vector>

#include "algorithms/builtin.hpp"
#include "algorithms/fragment_policy.hpp"
#include "algorithms/send_parameters.hpp"

namespace tether {
namespace {

struct OuterOptimizer {
    double learning_rate = 0.7;
    double momentum = 0.9;
    bool nesterov = true;
};

// The outer step at round close, on the round's x_i summed as averaging sums them.
class DilocoCenter final : public SynchronousCenterRule {
public:
    explicit DilocoCenter(OuterOptimizer outer) : outer_(outer) {}
    bool takes_ranges() const override { return true; }
    void contribute(CenterState& center, const Exchange& e) override {
        if (velocity_.empty()) velocity_.assign(center.x.size(), 0.f);
        sum_.add(e, center.x);
    }
    double close_round(CenterState& center, float* reply) override {
        const double lr = outer_.learning_rate, mu = outer_.momentum;
        double moved = 0;
        float* x = center.x.data();
        sum_.visit(
            [&](std::size_t i, double change) {
                const double gradient = -change;  // x~ - mean x_i
                const double velocity = mu * velocity_[i] + gradient;
                velocity_[i] = float(velocity);
                const double step = lr * (outer_.nesterov ? gradient + mu * velocity : velocity);
                const float updated = float(double(x[i]) - step);
                moved += double(updated - x[i]) * (updated - x[i]);
                x[i] = updated;
                reply[i] = updated;
            },
            [&](std::size_t i) { reply[i] = x[i]; });  // no exchange held it: no outer step there

        sum_.clear();
        return std::sqrt(moved);
    }

private:
    OuterOptimizer outer_;
    RoundSum sum_;
    std::vector<float> velocity_;  // the outer momentum, x~'s size
};

// The worker half is averaging's: send x_i, take x~.
class Diloco final : public RulePair<SendParametersWorker, DilocoCenter> {
public:
    Diloco(int window, Landing landing, OuterOptimizer outer, std::size_t fragments)
        : RulePair(window, landing, DilocoCenter(outer)), fragments_(fragments) {}
    // Fragments, or a merge that tether makes range by range: streaming DiLoCo's policy.
    std::unique_ptr<ExchangePolicy> make_exchange_policy(const StrategyContext& c) const override {
        if (fragments_ == 1 && !landing().mixing) return RulePair::make_exchange_policy(c);
        return std::make_unique<FragmentPolicy>(communication_window(), fragments_, landing());
    }

private:
    std::size_t fragments_;
};

}  // namespace

std::shared_ptr<const Strategy> make_diloco(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(10);
    OuterOptimizer outer;
    outer.learning_rate = options.number("outer_learning_rate", outer.learning_rate, 0.0, 100.0, true);
    outer.momentum = options.number("outer_momentum", outer.momentum, 0.0, 0.999999);
    outer.nesterov = options.boolean("nesterov", outer.nesterov);
    const int fragments = int(options.integer("fragments", 1, 1, 256));
    const std::string H = options.path_of("communication_window") + " " + std::to_string(window);
    if (fragments > window)
        throw ConfigError(options.path_of("fragments") + ": " + std::to_string(fragments) + " fragments with " + H +
                          "; each fragment needs a step of its own in the window: at most " + std::to_string(window));
    // A fragment's reply lands before the next fragment goes out, window / fragments steps later.
    Landing landing = options.landing(window / fragments);
    // The paper's merge of a late reply; none: tether's, the local steps since kept.
    landing.mixing = options.optional_number("mixing", std::nullopt, 0.0, 0.999999, false, "keep the local steps");
    return std::make_shared<Diloco>(window, landing, outer, std::size_t(fragments));
}

}  // namespace tether
