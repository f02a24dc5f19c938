// The worker halves that several built-in strategies share, for a strategy of one's own to pair
// with a center rule of its own (RulePair, <tether/strategy.hpp>):
//   PullPushWorker        send D = x_i - x_pull (or D / tau);  receive x~;  x_i <- x_pull <- x~
//                         (downpour, adag, dynsgd, adag-staleness, async-diloco)
//   SendParametersWorker  send x_i;  receive x~;  x_i <- x~   (averaging, diloco; easgd and
//                         aeasgd derive from it)
// Each says what its payload and its reply are (wire_kinds): the center rule paired with it must
// reply what it takes the reply for.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include <tether/rules.hpp>

namespace tether {

// The accumulated-update family: the worker sends what it trained since its last pull and takes
// x~ as its new x_i and x_pull.
class PullPushWorker final : public WorkerRule {
public:
    // The accumulated update out, x~ back.
    static constexpr WireKinds wire_kinds{WireVector::update, WireVector::state};

    // `normalize_window`: 0 sends the accumulated update as it is; tau divides it by tau (for
    // the last window of a run too: dividing its k < tau steps by k would weigh each of them
    // tau / k times as much as any other step, just before the final evaluation).
    explicit PullPushWorker(std::size_t size, int normalize_window = 0)
        : normalize_window_(normalize_window), size_(size) {}

    void on_join(VectorOps& ops, float* x, const float*) override {
        if (!ops.host_addressable()) scratch_ = DeviceBuffer<float>(ops, size_);
        copy_to_pulled(ops, x);  // x = x~ already
    }
    void make_payload(VectorOps& ops, const float* x, float* payload_host) override {
        // In host memory the update is computed straight into the message; a GPU computes it in
        // its own memory and downloads it once.
        float* update = ops.host_addressable() ? payload_host : scratch_.data();
        ops.difference(update, x, pulled(), size_);
        if (normalize_window_ > 0) ops.scale(update, size_, 1.f / float(normalize_window_));
        if (update != payload_host) scratch_.download(payload_host, size_);
    }
    void apply_reply(VectorOps& ops, float* x, const float* reply_host) override {
        ops.copy_from_host(x, reply_host, size_ * sizeof(float));
        copy_to_pulled(ops, x);
    }
    // In host memory x_pull is the reply itself, kept: one pass less per exchange.
    void apply_shared(VectorOps& ops, float* x, std::shared_ptr<const float> reply_host) override {
        if (!ops.host_addressable()) return apply_reply(ops, x, reply_host.get());
        ops.copy_from_host(x, reply_host.get(), size_ * sizeof(float));
        kept_reply_ = std::move(reply_host);
        pulled_ = DeviceBuffer<float>();  // a model's worth of memory, unused while a reply is kept
    }

private:
    const float* pulled() const { return kept_reply_ ? kept_reply_.get() : pulled_.data(); }
    void copy_to_pulled(VectorOps& ops, const float* x) {
        kept_reply_.reset();
        if (pulled_.size() != size_) pulled_ = DeviceBuffer<float>(ops, size_);
        ops.copy(pulled_.data(), x, size_ * sizeof(float));
    }

    int normalize_window_;
    std::size_t size_;
    // x_pull: the kept reply, or (joining, a reply given as a plain pointer, a GPU) a copy.
    std::shared_ptr<const float> kept_reply_;
    DeviceBuffer<float> pulled_, scratch_;
};

// Sends x_i and takes the reply as its new x_i. A rule that does more with the reply derives
// from it and overrides apply_reply, reading the reply through on_device(), and says its own
// wire_kinds where the reply is no longer a state.
class SendParametersWorker : public WorkerRule {
public:
    // x_i out, x~ back.
    static constexpr WireKinds wire_kinds{WireVector::state, WireVector::state};

    explicit SendParametersWorker(std::size_t size) : size_(size) {}
    void on_join(VectorOps& ops, float*, const float*) override {
        if (!ops.host_addressable()) scratch_ = DeviceBuffer<float>(ops, size_);
    }
    void make_payload(VectorOps& ops, const float* x, float* payload_host) override {
        ops.copy_to_host(payload_host, x, size_ * sizeof(float));
    }
    void apply_reply(VectorOps& ops, float* x, const float* reply_host) override {
        ops.copy_from_host(x, reply_host, size_ * sizeof(float));
    }

protected:
    std::size_t size() const { return size_; }
    // The reply in the worker's memory: host memory reads it where it arrived, a GPU needs it
    // uploaded first.
    const float* on_device(VectorOps& ops, const float* reply_host) {
        if (ops.host_addressable()) return reply_host;
        scratch_.upload(reply_host, size_);
        return scratch_.data();
    }

private:
    std::size_t size_;
    DeviceBuffer<float> scratch_;
};

}  // namespace tether
