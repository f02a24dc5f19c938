// Asynchronous DiLoCo (Liu, Douillard et al., "Asynchronous Local-SGD Training for Language
// Modeling", 2024, arXiv:2401.09135): DiLoCo's outer step applied to each worker's
// pseudo-gradient as it arrives, with no round to wait for.
//   worker, every H = tau steps (its own inner optimizer in between):
//                          send u = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on arrival k (k = 1, 2, ... at this server; counted per range where the center
//   applies exchanges range by range as their chunks arrive), with g = -u * s the pseudo-gradient
//   x_pull - x_i, s = 1 or (staleness "inverse") 1 / (1 + the versions x~ moved since the pull):
//     outer "sgd":               x~ <- x~ - lr g
//     outer "nesterov":          m <- mu m + g;  x~ <- x~ - lr (g + mu m)       (diloco's, per arrival)
//     outer "delayed-nesterov":  b <- b + g                                     (the paper's Delayed Nesterov, DN)
//                                if k mod D = 0:  m <- mu m + b / D;  x~ <- x~ - lr (g / D + mu m);  b <- 0
//                                else:            x~ <- x~ - lr g / D
//   Over D arrivals DN moves x~ by lr (mean g + mu m): one Nesterov step on the mean of D
//   pseudo-gradients, as a synchronous round of D workers would take, with momentum that a
//   single stale pseudo-gradient cannot drive; between milestones each arrival still moves x~,
//   so a worker never waits for the others. With D = 1 it is "nesterov".
// Dynamic local updates (`dynamic_windows`, the paper's DyLU): the center measures each
// worker's steps per second between its exchanges and gives it the window
// max(1, floor(H * v_i / v_max)) with its reply (v_max: the fastest live worker's rate, which
// keeps H), so that the windows of fast and slow workers end together in wall-clock time.
// Defaults: communication_window 50, outer "sgd" at outer_learning_rate min(1, 1 / N) (0.7 for
// the Nesterov kinds), outer_momentum 0.9, nesterov_delay the number of workers (a milestone averages about
// one pseudo-gradient per worker, as a synchronous round does), staleness "none",
// dynamic_windows false. Wire: the update goes out with error feedback, x~ comes back as a
// state, as for DOWNPOUR; overlap_steps, codecs and several servers (each its own counter and
// momentum over its range) as for every rule.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "algorithms/builtin.hpp"

namespace tether {
namespace {

enum class Outer { sgd, nesterov, delayed_nesterov };

struct AsyncOuter {
    Outer kind = Outer::delayed_nesterov;
    double learning_rate = 0.7;
    double momentum = 0.9;
    int delay = 1;              // D
    bool inverse_staleness = false;
};

class AsyncDilocoCenter final : public AsynchronousCenterRule {
public:
    explicit AsyncDilocoCenter(AsyncOuter outer) : outer_(outer) {}

    bool takes_ranges() const override { return true; }
    double apply(CenterState& center, const Exchange& e, float* reply) override {
        const std::size_t n = center.x.size();
        if (outer_.kind != Outer::sgd && momentum_.empty()) momentum_.assign(n, 0.f);
        if (outer_.kind == Outer::delayed_nesterov && buffer_.empty()) buffer_.assign(n, 0.f);
        const std::uint64_t staleness = center.version - std::min(center.version, e.pull_version);
        // g = x_pull - x_i = -u, damped by its age when asked.
        const double s = outer_.inverse_staleness ? 1.0 / (1.0 + double(staleness)) : 1.0;
        const double lr = outer_.learning_rate, mu = outer_.momentum, D = double(outer_.delay);
        // k counts the arrivals at this range (all of x~ when exchanges come whole): a range
        // that another worker's range overtook has its milestone one arrival apart.
        const bool milestone =
            outer_.kind == Outer::delayed_nesterov && ++arrivals_[e.offset] % std::uint64_t(outer_.delay) == 0;
        float* x = center.x.data() + e.offset;
        float* momentum = momentum_.empty() ? nullptr : momentum_.data() + e.offset;
        float* buffer = buffer_.empty() ? nullptr : buffer_.data() + e.offset;
        const float* u = e.payload;
        double moved = 0;
        for (std::size_t i = 0; i < e.size; ++i) {
            const double g = -double(u[i]) * s;  // read before reply[i] (maybe u[i]) is written
            double step = 0;
            switch (outer_.kind) {
            case Outer::sgd:
                step = lr * g;
                break;
            case Outer::nesterov: {
                const double m = mu * momentum[i] + g;
                momentum[i] = float(m);
                step = lr * (g + mu * m);
                break;
            }
            case Outer::delayed_nesterov:
                if (milestone) {
                    const double m = mu * momentum[i] + (double(buffer[i]) + g) / D;
                    momentum[i] = float(m);
                    buffer[i] = 0.f;
                    step = lr * (g / D + mu * m);
                } else {
                    buffer[i] = float(double(buffer[i]) + g);
                    step = lr * g / D;
                }
                break;
            }
            const float updated = float(double(x[i]) - step);
            moved += double(updated - x[i]) * double(updated - x[i]);
            x[i] = updated;
            reply[i] = updated;
        }
        return std::sqrt(moved);
    }

private:
    AsyncOuter outer_;
    std::vector<float> momentum_;  // m, x~'s size (not for sgd)
    std::vector<float> buffer_;    // b, the pseudo-gradients since the last milestone (DN)
    std::map<std::size_t, std::uint64_t> arrivals_;  // k, per range (by its offset)
};

// The worker half is DOWNPOUR's: send the accumulated update, take x~.
class AsyncDiloco final : public RulePair<PullPushWorker, AsyncDilocoCenter> {
public:
    AsyncDiloco(int window, Landing landing, AsyncOuter outer, bool dynamic_windows)
        : RulePair(window, landing, AsyncDilocoCenter(outer)), dynamic_windows_(dynamic_windows) {}
    bool dynamic_windows() const override { return dynamic_windows_; }

private:
    bool dynamic_windows_;
};

}  // namespace

std::shared_ptr<const Strategy> make_async_diloco(StrategyOptions& options, const StrategyContext& context) {
    const int window = options.communication_window(50);
    AsyncOuter outer;
    const std::string kind = options.choice("outer", "sgd", {"delayed-nesterov", "nesterov", "sgd"});
    outer.kind = kind == "sgd" ? Outer::sgd : kind == "nesterov" ? Outer::nesterov : Outer::delayed_nesterov;
    // SGD's rate scales with how arrivals bunch: N workers' arrivals in the time of one round
    // move x~ by N lr mean(g), so lr = 1 / N moves it mean(g) a round whatever N, as averaging's
    // round does (at most 1: one worker's pseudo-gradient is taken whole). Chosen with one worker
    // of 4 three times slower and without, on seeds the results do not reuse (docs/results.md,
    // section 13): larger rates reach a target sooner in some runs and miss it in others.
    const double rate = outer.kind == Outer::sgd ? std::min(1.0, 1.0 / double(std::max(1, context.workers))) : outer.learning_rate;
    outer.learning_rate = options.number("outer_learning_rate", rate, 0.0, 100.0, true);
    outer.momentum = options.number("outer_momentum", outer.momentum, 0.0, 0.999999);
    outer.delay = int(options.integer("nesterov_delay", std::max(1, context.workers), 1, 1'000'000));
    outer.inverse_staleness = options.choice("staleness", "none", {"none", "inverse"}) == "inverse";
    const bool dynamic = options.boolean("dynamic_windows", false);
    return std::make_shared<AsyncDiloco>(window, options.landing(window), outer, dynamic);
}

}  // namespace tether
