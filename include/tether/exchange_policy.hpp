// When a worker exchanges, what it exchanges and how the reply lands: the exchange policy a
// strategy makes for each worker (Strategy::make_exchange_policy in <tether/strategy.hpp>). The
// worker has one exchange path; it asks its policy after every local step.
//
//   when     due(t) after local step t names the part of x that goes out now, if any.
//   what     fragments() = 0: all of x, through the strategy's WorkerRule (make_payload, then
//            apply_shared on the reply). fragments() = F >= 1: x is split into F parts, part f
//            being server f's range of x~ (cluster.servers = F), and tether itself sends x's part
//            and takes the reply's part as the new x there: only for a rule whose wire kinds are
//            state/state (it sends x_i and takes x~), checked where strategies are made.
//   landing  the reply lands after `after_steps` more local steps d (0: at once, the worker waits
//            for it; d > 0: the exchange runs on tether's thread while the worker trains on).
//            With x(t) sent and x(t + d) trained since, x <- reply + (x(t + d) - x(t)) keeps
//            the d steps; with a mixing factor a (parts only), x <- a x(t + d) + (1 - a) reply.
//   window   the local steps between two exchanges of the same part; set_window() changes it
//            for this worker (a center that sizes windows to each worker's speed; nothing in
//            tether calls it yet): WindowPolicy counts the new window from its last exchange,
//            FragmentPolicy's phase follows step mod window from the next step on.
// A reply must land before the next exchange goes out: d is at most the fewest steps between
// two due exchanges (window() / max(fragments(), 1)).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace tether {

struct Landing {
    int after_steps = 0;           // d
    std::optional<double> mixing;  // a in [0, 1), fragments only; none: the d local steps are kept
    bool late() const { return after_steps > 0; }
};

class ExchangePolicy {
public:
    virtual ~ExchangePolicy() = default;
    // After local step `step` (1, 2, ...; a worker that takes over a place's trained samples
    // counts on from that place's steps): the part due now (0 when fragments() is 0), if any.
    // WindowPolicy counts calls since its last exchange; FragmentPolicy reads the step itself.
    virtual std::optional<std::size_t> due(std::size_t step) = 0;
    virtual std::size_t fragments() const { return 0; }
    virtual Landing landing() const { return {}; }
    virtual int window() const = 0;
    virtual void set_window(int steps) = 0;
};

// Every strategy's default: all of x after every `window`-th local step since the last exchange.
class WindowPolicy final : public ExchangePolicy {
public:
    explicit WindowPolicy(int window, Landing landing = {}) : window_(window), landing_(landing) {}
    std::optional<std::size_t> due(std::size_t) override {
        if (++since_ < std::size_t(window_)) return std::nullopt;
        since_ = 0;
        return 0;
    }
    Landing landing() const override { return landing_; }
    int window() const override { return window_; }
    void set_window(int steps) override {
        if (steps < 1) throw std::invalid_argument("WindowPolicy::set_window: " + std::to_string(steps) + "; at least 1");
        window_ = steps;
    }

private:
    int window_;
    Landing landing_;
    std::size_t since_ = 0;
};

}  // namespace tether
