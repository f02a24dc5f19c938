// The worker's one exchange path (worker/worker_node.hpp): after each local step it asks the
// policy what is due, sends it (blocking, or posted to the worker's thread when replies land
// late), and lands the reply in x: through the rule for all of x, range by range for fragments.
#include <algorithm>
#include <chrono>

#include "util/all_finite.hpp"
#include "util/errors.hpp"
#include "worker/worker_node.hpp"

namespace tether {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Every server welcomed the worker again: the reply is x~ whole.
Welcome welcome_of(const ExchangeOutcome& outcome) {
    Welcome w;
    w.version = outcome.version;
    w.center.assign(outcome.reply.floats(), outcome.reply.floats() + outcome.reply.size() / sizeof(float));
    w.buffers = outcome.buffers;
    return w;
}

}  // namespace

// A step can leave NaN or Inf in x while its loss was still finite: stop here, by name, before
// anything goes out. Checking while the exchange was in flight instead saved the check's pass but
// let a lossy codec turn the NaN into a finite update the center applies (int8's block scale
// ignores it, top-k drops it), let the finite ranges of several servers apply theirs, and left a
// reply unread. The check reads x, before the payload is made from it, not the payload: reading
// the payload back just before it is sent halved the exchange rate over inproc on a 2-core
// machine (measured: experiments/README.md). What goes on the wire the center checks itself, and
// refuses by name.
void WorkerNode::check_finite(const float* x, std::size_t count, const std::string& where) const {
    const bool finite = backend_->host_addressable() ? host::all_finite(x, count) : backend_->all_finite(x, count);
    if (!finite)
        throw DivergedError("diverged at step " + std::to_string(result_.steps) + " (non-finite parameters" + where +
                            " at exchange " + std::to_string(result_.exchanges + 1) + ")");
}

Payload& WorkerNode::make_payload(const std::vector<std::size_t>& parts) {
    // The whole vector's size for parts too, so that the recycled buffers fit any of them.
    Payload& payload = payloads_.next(num_parameters_ * sizeof(float));
    if (whole()) {
        if (layout_->staged()) layout_->gather();  // the snapshot x(t) the exchange is about; the buffers train on
        check_finite(layout_->x(), num_parameters_, "");
        rule_->make_payload(*backend_, layout_->x(), payload.floats());
        return payload;
    }
    for (std::size_t f : parts) {
        const ServerRange& r = session_.range(f);
        if (layout_->staged()) layout_->gather(r.first, r.count);
        const float* x = layout_->x() + r.first;
        check_finite(x, r.count, " in fragment " + std::to_string(f));
        backend_->copy_to_host(payload.floats() + r.first, x, r.count * sizeof(float));
    }
    return payload;
}

void WorkerNode::exchange(const std::vector<std::size_t>& parts) {
    const Payload& payload = make_payload(parts);
    // Server 0 holds the model buffers: they travel with every exchange that reaches it.
    const bool to_server_0 = whole() || std::find(parts.begin(), parts.end(), 0) != parts.end();
    const std::optional<Payload> buffers = to_server_0 ? make_buffers() : std::nullopt;
    const auto started = Clock::now();
    const ExchangeOutcome outcome = whole() ? session_.exchange(payload, progress(), buffers ? &*buffers : nullptr)
                                            : session_.exchange_some(parts, payload, progress(), buffers ? &*buffers : nullptr);
    result_.seconds_waiting += seconds_since(started);
    // Gone out and answered: only now is what the steps did on the center's side. A send that
    // failed leaves it changed, and finish() tries again.
    for (std::size_t f : parts) changed_[f] = false;
    land(parts, outcome, false);
}

void WorkerNode::post(std::size_t part) {
    Payload payload = make_payload({part});
    const bool to_server_0 = whole() || part == 0;
    thread_->post(std::move(payload), progress(), to_server_0 ? make_buffers() : std::nullopt,
                  whole() ? std::nullopt : std::optional<std::size_t>(part));
    changed_[part] = false;
    in_flight_ = InFlight{part, result_.steps + std::size_t(landing_.after_steps)};
}

void WorkerNode::complete() {
    const std::size_t part = in_flight_->part;
    in_flight_.reset();
    const auto started = Clock::now();
    const ExchangeOutcome outcome = thread_->wait();
    result_.seconds_waiting += seconds_since(started);
    land({part}, outcome, true);
}

void WorkerNode::land(const std::vector<std::size_t>& parts, const ExchangeOutcome& outcome, bool late) {
    // Dynamic local updates: the center sized this worker's next window to its speed.
    if (outcome.window > 0) {
        if (outcome.window != policy_->window()) {
            policy_->set_window(outcome.window);
            ++result_.window_changes;
        }
        result_.last_window = outcome.window;
        result_.smallest_window = result_.smallest_window ? std::min(result_.smallest_window, outcome.window) : outcome.window;
        result_.largest_window = std::max(result_.largest_window, outcome.window);
    }
    budget_met_ = budget_met_ || outcome.budget_met;
    if (whole()) land_whole(outcome, late);
    else for (std::size_t f : parts) land_fragment(f, outcome);
    backend_->synchronize();  // the caller's next step may touch x (and the rule's buffers) at once
    publish_progress();
}

void WorkerNode::land_whole(const ExchangeOutcome& outcome, bool late) {
    if (rejoined_everywhere(outcome)) {
        take_welcome(welcome_of(outcome));  // x~ replaces the work since the exchange went out
        return;
    }
    // Late, the reply moves the snapshot x(t) to x'(t); the buffers, which trained on to x(t + d),
    // become x'(t) + (x(t + d) - x(t)): the rule's change lands d steps late, the d steps kept.
    if (late) layout_->subtract_x();
    rule_->apply_shared(*backend_, layout_->x(), outcome.reply.shared_floats());
    if (!outcome.rejoined.empty()) take_partial_welcome(outcome);
    if (late) layout_->add_x();
    else if (layout_->staged()) layout_->scatter();
    ++result_.exchanges;
}

// Fragment f's reply is x~_f, or from a server that had forgotten this worker its welcome: x~_f
// either way. x_f(t) sits in the staging range (or, unstaged, is x_f itself) and the buffers hold
// x_f(t + d): the reply replaces x_f(t) under the steps since, or is mixed in.
void WorkerNode::land_fragment(std::size_t f, const ExchangeOutcome& outcome) {
    const ServerRange& r = session_.range(f);
    if (f == 0 && !outcome.buffers.empty()) take_buffers(outcome.buffers);  // server 0 welcomed it again
    const auto take = [&] {
        backend_->copy_from_host(layout_->x() + r.first, outcome.reply.floats() + r.first, r.count * sizeof(float));
    };
    if (landing_.mixing) {
        take();
        layout_->mix_x(r.first, r.count, float(*landing_.mixing));
    } else if (layout_->staged()) {
        layout_->subtract_x(r.first, r.count);
        take();
        layout_->add_x(r.first, r.count);
    } else {
        take();  // at once: x_f(t + 0) is x_f(t)
    }
    ++result_.exchanges;
}

bool WorkerNode::after_step(std::size_t samples) {
    ++result_.steps;
    result_.samples += samples;
    changed_.assign(changed_.size(), true);
    const bool lands = in_flight_ && result_.steps >= in_flight_->lands_after;
    if (lands) complete();
    if (const std::optional<std::size_t> part = policy_->due(result_.steps)) {
        if (*part >= changed_.size())
            throw std::logic_error("the exchange policy named part " + std::to_string(*part) + " of " +
                                   std::to_string(changed_.size()) + " (its fragments(): " + std::to_string(fragments_) +
                                   "); <tether/exchange_policy.hpp> says what may be");
        if (in_flight_) complete();  // a window shortened below d: one exchange in flight at a time
        if (landing_.late()) post(*part);
        else exchange({*part});
        return true;
    }
    publish_progress();
    session_.heartbeat_if_idle();
    return lands;  // a reply changed x: a replica group broadcasts it
}

// Nothing trained is left behind: every part changed since it last went out goes out once more,
// all at once (each server's last round; one after the other, a worker's wait on one server's
// round could wait on another worker that waits on this one at another server).
WorkerResult WorkerNode::finish() {
    if (in_flight_) complete();
    std::vector<std::size_t> changed;
    for (std::size_t f = 0; f < changed_.size(); ++f)
        if (changed_[f]) changed.push_back(f);
    if (!changed.empty()) exchange(changed);
    session_.bye();
    result_.bytes_sent = session_.bytes_sent();
    result_.bytes_received = session_.bytes_received();
    result_.rejoins = session_.rejoins();
    return result_;
}

}  // namespace tether
