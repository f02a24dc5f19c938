// The halves shared by the accumulated-update strategies (downpour, adag, dynsgd,
// adag-staleness): the worker sends x_i - x_pull (adag: divided by the local steps it
// accumulates), the center adds it (possibly damped) and replies with x~, which becomes both
// x_i and the next x_pull.
#pragma once

#include <tether/strategy.hpp>

namespace tether {

class PullPushWorker final : public WorkerRule {
public:
    // `normalize_window`: 0 sends the accumulated update as it is; tau divides it by tau (for
    // the last window of a run too: dividing its k < tau steps by k would weigh each of them
    // tau / k times as much as any other step, just before the final evaluation).
    PullPushWorker(std::size_t size, int normalize_window) : normalize_window_(normalize_window), size_(size) {}

    void on_join(VectorOps& ops, float* x, const float* center_host) override;
    void make_payload(VectorOps& ops, const float* x, float* payload_host) override;
    void apply_reply(VectorOps& ops, float* x, const float* reply_host) override;
    // In host memory x_pull is the reply itself, kept: one pass less per exchange.
    void apply_shared(VectorOps& ops, float* x, std::shared_ptr<const float> reply_host) override;

private:
    const float* pulled() const { return kept_reply_ ? kept_reply_.get() : pulled_.data(); }
    void copy_to_pulled(VectorOps& ops, const float* x);

    int normalize_window_;
    std::size_t size_;
    // x_pull: the kept reply, or (joining, a reply given as a plain pointer, a GPU) a copy.
    std::shared_ptr<const float> kept_reply_;
    DeviceBuffer<float> pulled_, scratch_;
};

// x~ <- x~ + d * payload; reply x~. Returns the norm of the step on x~.
double accumulate(CenterState& center, const Exchange& exchange, float d, float* reply);

// x~ <- x~ + payload; reply x~ (downpour, adag).
class AccumulatingCenter final : public AsynchronousCenterRule {
public:
    bool takes_ranges() const override { return true; }
    double apply(CenterState& center, const Exchange& exchange, float* reply) override {
        return accumulate(center, exchange, 1.f, reply);
    }
};

}  // namespace tether
