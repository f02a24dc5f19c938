// Asynchronous EASGD (Zhang, Choromanska, LeCun, "Deep learning with Elastic Averaging SGD",
// NIPS 2015, Algorithm 1).
//   worker, every tau steps:  send x_i;  receive e;  x_i <- x_i - e
//   center, on receipt:       e = alpha (x_i - x~);  x~ <- x~ + e;  reply e
// The center computes e from its current x~ and both sides apply the same e in one round
// trip, so the elastic force stays symmetric. Defaults: communication_window 10,
// moving_rate alpha = 0.9 / N (beta = N alpha = 0.9, the paper's choice).
#include "algorithms/builtin.hpp"
#include "algorithms/send_parameters.hpp"

namespace tether {
namespace {

// x_i <- x_i - e.
class AeasgdWorker final : public SendParametersWorker {
public:
    // x_i out, the elastic difference e back, which x_i subtracts.
    static constexpr WireKinds wire_kinds{WireVector::state, WireVector::update};
    using SendParametersWorker::SendParametersWorker;
    void apply_reply(VectorOps& ops, float* x, const float* reply_host) override {
        ops.axpy(x, on_device(ops, reply_host), size(), -1.f);
    }
};

class AeasgdCenter final : public AsynchronousCenterRule {
public:
    explicit AeasgdCenter(float alpha) : alpha_(alpha) {}
    bool takes_ranges() const override { return true; }
    double apply(CenterState& center, const Exchange& e, float* reply) override {
        float* x = center.x.data() + e.offset;
        const float* payload = e.payload;
        // A local copy: the loop's stores could alias alpha_ as far as the compiler knows, and
        // it reloaded it for every vector.
        const float alpha = alpha_;
        return host::for_each_norm(e.size, [&](std::size_t i) {
            const float elastic = alpha * (payload[i] - x[i]);
            x[i] += elastic;
            reply[i] = elastic;
            return elastic;
        });
    }

private:
    float alpha_;
};

using Aeasgd = RulePair<AeasgdWorker, AeasgdCenter>;

}  // namespace

std::shared_ptr<const Strategy> make_aeasgd(StrategyOptions& options, const StrategyContext& context) {
    const int window = options.communication_window(10);
    const Landing landing = options.landing(window);
    return std::make_shared<Aeasgd>(window, landing, AeasgdCenter(float(read_moving_rate(options, context))));
}

}  // namespace tether
