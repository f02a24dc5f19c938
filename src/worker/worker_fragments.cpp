// A worker's streaming DiLoCo fragments (ExchangeSchedule in <tether/strategy.hpp>): fragment f
// is server f's range of x, exchanged alone on its own steps (worker/fragment_schedule.hpp).
// The strategy's worker half sends x_i and takes x~ (state/state, checked where strategies are
// made), so the worker copies the range out and the reply in itself, without the rule: a
// fragment's exchange moves 1/F of x through memory, not all of it.
#include <algorithm>
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
        else exchange_fragments({*due});
        return true;
    }
    publish_progress();
    session_.heartbeat_if_idle();
    return lands;  // a reply changed x: a replica group broadcasts it
}

void WorkerNode::fragment_out(std::size_t f, Payload& payload) {
    const ServerRange& r = session_.range(f);
    if (layout_->staged()) layout_->gather(r.first, r.count);  // the snapshot x_f(t) the exchange is about
    const float* x = layout_->x() + r.first;
    // As make_payload(): nothing non-finite goes out, and the step is named.
    const bool finite = backend_->host_addressable() ? host::all_finite(x, r.count) : backend_->all_finite(x, r.count);
    if (!finite)
        throw DivergedError("diverged at step " + std::to_string(result_.steps) + " (non-finite parameters in fragment " +
                            std::to_string(f) + " at exchange " + std::to_string(result_.exchanges + 1) + ")");
    backend_->copy_to_host(payload.floats() + r.first, x, r.count * sizeof(float));
    fragment_changed_[f] = false;
}

// x_f(t) sits in the staging range (or, unstaged, is x_f itself) and the buffers hold
// x_f(t + d): the reply (or, from a server that had forgotten this worker, its welcome: x~_f
// either way) replaces x_f(t) under the steps since, or is mixed in (`mixing`).
void WorkerNode::land_fragment(std::size_t f, const ExchangeOutcome& outcome) {
    const ServerRange& r = session_.range(f);
    if (f == 0 && !outcome.buffers.empty()) take_buffers(outcome.buffers);  // server 0 welcomed it again
    const auto take = [&] {
        backend_->copy_from_host(layout_->x() + r.first, outcome.reply.floats() + r.first, r.count * sizeof(float));
    };
    const std::optional<double> mixing = options_.schedule.mixing;
    if (mixing) {
        take();
        layout_->mix_x(r.first, r.count, float(*mixing));
    } else if (layout_->staged()) {
        layout_->subtract_x(r.first, r.count);
        take();
        layout_->add_x(r.first, r.count);
    } else {
        take();  // blocking: x_f(t + 0) is x_f(t)
    }
    ++result_.exchanges;
}

void WorkerNode::exchange_fragments(const std::vector<std::size_t>& fragments) {
    // The whole vector's size, so that the recycled buffers fit any fragments; theirs are sent.
    Payload& payload = payloads_.next(num_parameters_ * sizeof(float));
    for (std::size_t f : fragments) fragment_out(f, payload);
    const bool to_server_0 = std::find(fragments.begin(), fragments.end(), 0) != fragments.end();
    const std::optional<Payload> buffers = to_server_0 ? make_buffers() : std::nullopt;
    const auto started = std::chrono::steady_clock::now();
    const ExchangeOutcome outcome = session_.exchange_some(fragments, payload, progress(), buffers ? &*buffers : nullptr);
    result_.seconds_waiting += seconds_since(started);
    for (std::size_t f : fragments) land_fragment(f, outcome);
    backend_->synchronize();  // the caller's next step may touch x at once
    publish_progress();
}

void WorkerNode::post_fragment(std::size_t f) {
    Payload& payload = payloads_.next(num_parameters_ * sizeof(float));
    fragment_out(f, payload);  // the buffers train on from the snapshot
    thread_->post(payload, progress(), f == 0 ? make_buffers() : std::nullopt, f);
    posted_fragment_ = PostedFragment{f, result_.steps + std::size_t(options_.schedule.overlap_steps)};
}

void WorkerNode::complete_fragment() {
    const std::size_t f = posted_fragment_->fragment;
    posted_fragment_.reset();
    const auto started = std::chrono::steady_clock::now();
    const ExchangeOutcome outcome = thread_->wait();
    result_.seconds_waiting += seconds_since(started);
    land_fragment(f, outcome);
    backend_->synchronize();
    publish_progress();
}

// Nothing trained is left behind: every fragment changed since it last went out goes out once
// more, all at once (each server's last round; one after the other, a worker's wait on one
// server's round could wait on another worker that waits on this one at another server).
void WorkerNode::finish_fragments() {
    if (posted_fragment_) complete_fragment();
    std::vector<std::size_t> changed;
    for (std::size_t f = 0; f < fragment_changed_.size(); ++f)
        if (fragment_changed_[f]) changed.push_back(f);
    if (!changed.empty()) exchange_fragments(changed);
}

}  // namespace tether
