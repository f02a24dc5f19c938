// Synchronous model averaging (parameter averaging every tau steps; McDonald et al. 2010,
// Zhang et al. 2015 as the alpha = 1/N limit of EASGD).
//   worker, every tau steps:  send x_i;  wait;  x_i <- x~
//   center, round close:      x~ <- mean of the x_i received
// Defaults: communication_window 10.
#include <cmath>

#include "algorithms/builtin.hpp"
#include "algorithms/send_parameters.hpp"

namespace tether {
namespace {

class AveragingCenter final : public SynchronousCenterRule {
public:
    bool takes_ranges() const override { return true; }
    void contribute(CenterState& center, const Exchange& e) override { sum_.add(e, center.x); }
    double close_round(CenterState& center, float* reply) override {
        double moved = 0;
        float* x = center.x.data();
        sum_.visit(
            [&](std::size_t i, double change) {
                const float mean = float(double(x[i]) + change);
                moved += double(mean - x[i]) * (mean - x[i]);
                x[i] = mean;
                reply[i] = mean;
            },
            [&](std::size_t i) { reply[i] = x[i]; });  // no exchange held it: x~ stays
        sum_.clear();
        return std::sqrt(moved);
    }

private:
    RoundSum sum_;
};

using Averaging = RulePair<SendParametersWorker, AveragingCenter>;

}  // namespace

std::shared_ptr<const Strategy> make_averaging(StrategyOptions& options, const StrategyContext&) {
    const int window = options.communication_window(10);
    return std::make_shared<Averaging>(window, options.landing(window));
}

}  // namespace tether
