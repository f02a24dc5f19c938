// The worker and center halves shared by the accumulated-update family (downpour, adag,
// dynsgd, adag-staleness): the worker sends x_i - x_pull (adag: divided by the local steps it
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

protected:
    void join(VectorOps& ops, float* x, const float* center_host) override;
    void write_payload(VectorOps& ops, const float* x, float* payload_host) override;
    void apply(VectorOps& ops, float* x, const float* reply_host) override;
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

// x~ <- x~ + damping(staleness) * payload; reply x~.
class AccumulatingCenter : public AsynchronousCenterRule {
public:
    double apply(CenterState& center, const Exchange& exchange, float* reply) override;

protected:
    // 1 for downpour and adag; 1 / (staleness + 1) for dynsgd.
    virtual float damping(std::uint64_t staleness) const { (void)staleness; return 1.f; }
};

}  // namespace tether
