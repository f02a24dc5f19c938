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
#include <cmath>
#include <vector>

#include "algorithms/builtin.hpp"
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
    void contribute(CenterState& center, const Exchange& e) override {
        if (velocity_.empty()) velocity_.assign(center.x.size(), 0.f);
        sum_.add(e, center.x.size());
    }
    double close_round(CenterState& center, float* reply) override {
        const double lr = outer_.learning_rate, mu = outer_.momentum;
        double moved = 0;
        for (std::size_t i = 0; i < sum_.size(); ++i) {
            const double gradient = double(center.x[i]) - sum_.mean(i);
            const double velocity = mu * velocity_[i] + gradient;
            velocity_[i] = float(velocity);
            const double step = lr * (outer_.nesterov ? gradient + mu * velocity : velocity);
            const float updated = float(double(center.x[i]) - step);
            moved += double(updated - center.x[i]) * (updated - center.x[i]);
            center.x[i] = updated;
            reply[i] = updated;
        }
        sum_.clear();
        return std::sqrt(moved);
    }

private:
    OuterOptimizer outer_;
    RoundSum sum_;
    std::vector<float> velocity_;  // the outer momentum, x~'s size
};

class Diloco final : public WindowedStrategy {
public:
    // As averaging: x_i out, x~ back.
    Diloco(int window, OuterOptimizer outer) : WindowedStrategy(window, {WireVector::state, WireVector::state}), outer_(outer) {}
    // The worker half is averaging's: send x_i, take x~.
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& c) const override {
        return std::make_unique<SendParametersWorker>(c.num_parameters);
    }
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext&) const override {
        return center_rule<DilocoCenter>(outer_);
    }

private:
    OuterOptimizer outer_;
};

}  // namespace

std::shared_ptr<const Strategy> make_diloco(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(10);
    OuterOptimizer outer;
    outer.learning_rate = options.number("outer_learning_rate", outer.learning_rate, 0.0, 100.0, true);
    outer.momentum = options.number("outer_momentum", outer.momentum, 0.0, 0.999999);
    outer.nesterov = options.boolean("nesterov", outer.nesterov);
    return std::make_shared<Diloco>(window, outer);
}

}  // namespace tether
