#include "algorithms/diloco.hpp"

#include <cmath>

#include "algorithms/elastic.hpp"

namespace tether {
namespace {

struct OuterOptimizer {
    double learning_rate = 0.7;
    double momentum = 0.9;
    bool nesterov = true;
};

// The outer step at round close; the round's x_i are summed in double, as averaging does.
class DilocoCenter final : public SynchronousCenterRule {
public:
    explicit DilocoCenter(OuterOptimizer outer) : outer_(outer) {}
    void contribute(CenterState& center, const Exchange& e) override {
        if (sum_.empty()) {
            sum_.assign(center.x.size(), 0.0);
            velocity_.assign(center.x.size(), 0.f);
        }
        for (std::size_t i = 0; i < e.size; ++i) sum_[i] += e.payload[i];
        ++count_;
    }
    double close_round(CenterState& center, float* reply) override {
        const double lr = outer_.learning_rate, mu = outer_.momentum;
        double moved = 0;
        for (std::size_t i = 0; i < sum_.size(); ++i) {
            const double gradient = double(center.x[i]) - sum_[i] / double(count_);
            const double velocity = mu * velocity_[i] + gradient;
            velocity_[i] = float(velocity);
            const double step = lr * (outer_.nesterov ? gradient + mu * velocity : velocity);
            const float updated = float(double(center.x[i]) - step);
            moved += double(updated - center.x[i]) * (updated - center.x[i]);
            center.x[i] = updated;
            reply[i] = updated;
        }
        sum_.assign(sum_.size(), 0.0);
        count_ = 0;
        return std::sqrt(moved);
    }

private:
    OuterOptimizer outer_;
    std::vector<double> sum_;
    std::vector<float> velocity_;  // the outer momentum, x~'s size
    std::size_t count_ = 0;
};

class DilocoStrategy final : public Strategy {
public:
    DilocoStrategy(int window, OuterOptimizer outer) : window_(window), outer_(outer) {}
    int communication_window() const override { return window_; }
    // The worker half is averaging's: send x_i, take x~.
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& c) const override {
        return std::make_unique<SendParametersWorker>(c.num_parameters, SendParametersWorker::Reply::replace, 1.f);
    }
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext&) const override {
        return center_rule<DilocoCenter>(outer_);
    }
    // As averaging: x_i out, x~ back.
    WireKinds wire_kinds() const override { return {WireVector::state, WireVector::state}; }

private:
    int window_;
    OuterOptimizer outer_;
};

}  // namespace

std::shared_ptr<const Strategy> make_diloco(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(10);
    OuterOptimizer outer;
    outer.learning_rate = options.number("outer_learning_rate", outer.learning_rate, 0.0, 100.0, true);
    outer.momentum = options.number("outer_momentum", outer.momentum, 0.0, 0.999999);
    outer.nesterov = options.boolean("nesterov", outer.nesterov);
    return std::make_shared<DilocoStrategy>(window, outer);
}

}  // namespace tether
