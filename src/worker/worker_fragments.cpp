// A worker's streaming DiLoCo fragments (ExchangeSchedule in <tether/strategy.hpp>): fragment f
// is server f's range of x, exchanged alone on its own steps (worker/fragment_schedule.hpp).
// The strategy's worker half sends x_i and takes x~ (state/state, checked where strategies are
// made), so the worker copies the range out and the reply in itself, without the rule: a
// fragment's exchange moves 1/F of x through memory, not all of it.
#include <chrono>

#include "util/all_finite.hpp"
#include "util/errors.hpp"
#include "worker/worker_node.hpp"

namespace tether {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

bool WorkerNode::after_fragment_step() {
    fragment_changed_.assign(fragment_changed_.size(), true);
    const bool lands = posted_fragment_ && result_.steps >= posted_fragment_->lands_after;
    if (lands) complete_fragment();
    const std::optional<std::size_t> due = fragments_.due(result_.steps);
    if (due) {
        if (options_.schedule.overlap_steps > 0) post_fragment(*due);
        else exchange_fragment(*due);
        return true;
    }
    publish_progress();
    session_.heartbeat_if_idle();
    return lands;  // a reply changed x: a replica group broadcasts it
}

Payload& WorkerNode::fragment_payload(std::size_t f) {
    const ServerRange& r = session_.range(f);
    const float* x = layout_->x() + r.first;
    // As make_payload(): nothing non-finite goes out, and the step is named.
    const bool finite = backend_->host_addressable() ? host::all_finite(x, r.count) : backend_->all_finite(x, r.count);
    if (!finite)
        throw DivergedError("diverged at step " + std::to_string(result_.steps) + " (non-finite parameters in fragment " +
                            std::to_string(f) + " at exchange " + std::to_string(result_.exchanges + 1) + ")");
    // The whole vector's size, so that the recycled buffers fit every fragment; f's range is sent.
    Payload& payload = payloads_.next(num_parameters_ * sizeof(float));
    backend_->copy_to_host(payload.floats() + r.first, x, r.count * sizeof(float));
    fragment_changed_[f] = false;
    return payload;
}

// The reply (or, from a server that had forgotten this worker, its welcome: x~_f either way)
// into `into`, the range's place in x or in the snapshot.
void WorkerNode::take_fragment(std::size_t f, const ExchangeOutcome& outcome, float* into) {
    if (!outcome.buffers.empty()) take_buffers(outcome.buffers);  // server 0 welcomed it again
    backend_->copy_from_host(into, outcome.reply.floats(), session_.range(f).count * sizeof(float));
    ++result_.exchanges;
}

// x_f(t) sits in the staging range (or, unstaged, is x_f itself) and the buffers hold
// x_f(t + d): the reply replaces x_f(t) under the steps since, or is mixed in (`mixing`).
void WorkerNode::land_fragment(std::size_t f, const ExchangeOutcome& outcome) {
    const ServerRange& r = session_.range(f);
    const std::optional<double> mixing = options_.schedule.mixing;
    if (mixing) {
        take_fragment(f, outcome, layout_->x() + r.first);
        layout_->mix_x(r.first, r.count, float(*mixing));
    } else if (layout_->staged()) {
        layout_->subtract_x(r.first, r.count);
        take_fragment(f, outcome, layout_->x() + r.first);
        layout_->add_x(r.first, r.count);
    } else {
        take_fragment(f, outcome, layout_->x() + r.first);  // blocking: x_f(t + 0) is x_f(t)
    }
    backend_->synchronize();  // the caller's next step may touch x at once
    publish_progress();
}

void WorkerNode::exchange_fragment(std::size_t f) {
    const ServerRange& r = session_.range(f);
    if (layout_->staged()) layout_->gather(r.first, r.count);
    const Payload& payload = fragment_payload(f);
    const std::optional<Payload> buffers = f == 0 ? make_buffers() : std::nullopt;
    const auto started = std::chrono::steady_clock::now();
    const ExchangeOutcome outcome = session_.exchange_one(f, payload, progress(), buffers ? &*buffers : nullptr);
    result_.seconds_waiting += seconds_since(started);
    land_fragment(f, outcome);
}

void WorkerNode::post_fragment(std::size_t f) {
    const ServerRange& r = session_.range(f);
    layout_->gather(r.first, r.count);  // the snapshot x_f(t) the exchange is about; the buffers train on
    Payload payload = fragment_payload(f);
    thread_->post(std::move(payload), progress(), f == 0 ? make_buffers() : std::nullopt, f);
    posted_fragment_ = PostedFragment{f, result_.steps + std::size_t(options_.schedule.overlap_steps)};
}

void WorkerNode::complete_fragment() {
    const std::size_t f = posted_fragment_->fragment;
    posted_fragment_.reset();
    const auto started = std::chrono::steady_clock::now();
    const ExchangeOutcome outcome = thread_->wait();
    result_.seconds_waiting += seconds_since(started);
    land_fragment(f, outcome);
}

// Nothing trained is left behind: every fragment changed since it last went out goes out once
// more, in order (each server's last round).
void WorkerNode::finish_fragments() {
    if (posted_fragment_) complete_fragment();
    for (std::size_t f = 0; f < fragment_changed_.size(); ++f)
        if (fragment_changed_[f]) exchange_fragment(f);
}

}  // namespace tether
