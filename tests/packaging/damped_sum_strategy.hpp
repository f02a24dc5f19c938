// A strategy written outside tether, against <tether/strategy.hpp> alone: DOWNPOUR whose
// commits the center damps by a factor s, by default 1 / N (each worker's update then counts
// as its share of the mean). docs/strategies.md, "Adding a strategy", walks through this file.
//   worker, every tau steps:  send D = x_i - x_pull;  receive x~;  x_i <- x_pull <- x~
//   center, on receipt:       x~ <- x~ + s D;  reply x~
// Options: communication_window (default 1), scale s (> 0 and <= 1; default 1 / workers).
// Built by the out-of-tree consumer (tests/packaging) and by tests/unit/user_strategy_test.cpp.
#pragma once

#include <tether/strategy.hpp>

#include <memory>
#include <optional>

namespace damped_sum {

// The worker half. x lives in the worker's memory (host or GPU): only VectorOps touch it.
class Worker final : public tether::WorkerRule {
public:
    // What it sends and what it takes the reply for: unsaid (an update and a state), so
    // damped-sum runs with float32 only.
    static constexpr tether::WireKinds wire_kinds{};

    explicit Worker(std::size_t size) : size_(size) {}

    void on_join(tether::VectorOps& ops, float* x, const float*) override {
        pulled_ = tether::DeviceBuffer<float>(ops, size_);
        scratch_ = tether::DeviceBuffer<float>(ops, size_);
        ops.copy(pulled_.data(), x, size_ * sizeof(float));  // x_pull <- x = x~
    }
    void make_payload(tether::VectorOps& ops, const float* x, float* payload_host) override {
        // Host memory: straight into the message. A GPU: on the device, then one download.
        float* update = ops.host_addressable() ? payload_host : scratch_.data();
        ops.difference(update, x, pulled_.data(), size_);  // D = x_i - x_pull
        if (update != payload_host) scratch_.download(payload_host, size_);
    }
    void apply_reply(tether::VectorOps& ops, float* x, const float* reply_host) override {
        ops.copy_from_host(x, reply_host, size_ * sizeof(float));  // x_i <- x~
        ops.copy(pulled_.data(), x, size_ * sizeof(float));        // x_pull <- x~
    }

private:
    std::size_t size_;
    tether::DeviceBuffer<float> pulled_, scratch_;
};

// The center half: x~ is host memory. `reply` may be the payload itself, so each element is
// read before it is written.
class Center final : public tether::AsynchronousCenterRule {
public:
    explicit Center(float scale) : scale_(scale) {}
    double apply(tether::CenterState& center, const tether::Exchange& e, float* reply) override {
        const double moved = scale_ * tether::host::norm(e.payload, e.size);
        for (std::size_t i = 0; i < e.size; ++i) {
            center.x[i] += scale_ * e.payload[i];
            reply[i] = center.x[i];
        }
        return moved;  // the norm of the update applied to x~
    }

private:
    float scale_;
};

// The strategy: the two halves, tau and the wire kinds (the worker's).
using Strategy = tether::RulePair<Worker, Center>;

// The factory reads the strategy's own block; tether rejects any key it did not ask for.
inline std::shared_ptr<const tether::Strategy> make(tether::StrategyOptions& options,
                                                   const tether::StrategyContext& context) {
    const int window = options.communication_window(1);
    std::optional<double> scale = options.optional_number("scale", std::nullopt, 0.0, 1.0, true, "1 / workers");
    if (!scale) {
        scale = 1.0 / context.workers;
        options.resolve("scale", *scale);  // the summary shows the value used, not null
    }
    return std::make_shared<Strategy>(window, tether::Landing{}, Center(float(*scale)));
}

inline void register_it() { tether::register_strategy("damped-sum", "DOWNPOUR with commits scaled by s", make); }

}  // namespace damped_sum
