// The center's peers: who may join (and take which worker id), who is alive, and the small
// answers that keep a worker's waits bounded. State for a peer lives from its hello to its bye,
// loss or refusal, and no longer; the number of peers held at once is capped.
#include <algorithm>
#include <cstdio>
#include <set>

#include "center/center.hpp"
#include "center/center_worker.hpp"

namespace tether {

void Center::handle_hello(const std::string& peer, const Header& h, const Frames& frames) {
    if (h.element_count != state_.x.size())
        return reject(peer, 0, "wrong count",
                      "worker has " + std::to_string(h.element_count) + " parameters, center " + std::to_string(state_.x.size()));
    if (find(peer)) return reject(peer, h.worker_id, "duplicate hello", "this worker already joined");
    if (options_.membership.ids_from_hello && !admits_id(peer, h, frames)) return;  // center_tokens.cpp
    if (by_peer_.size() >= options_.membership.max_peers)
        return reject(peer, 0, "too many peers",
                      "the center holds " + std::to_string(by_peer_.size()) + " peers (cluster.max_peers)");
    // A place freed by a lost or finished worker may be taken again; more than cluster.workers
    // only with cluster.elastic.
    if (!options_.membership.elastic && stats_.live_workers() >= options_.membership.expected_workers) lose_disconnected();
    if (!options_.membership.elastic && stats_.live_workers() >= options_.membership.expected_workers)
        return reject(peer, 0, "run full",
                      "all " + std::to_string(options_.membership.expected_workers) + " places (cluster.workers) are taken and cluster.elastic is false");
    auto w = std::make_unique<Worker>();
    w->peer = peer;
    w->id = options_.membership.ids_from_hello ? h.worker_id : free_worker_id(h.worker_id);
    w->last_seen = Clock::now();
    // A worker coming back says what it trained before: what it trained beyond the record of a
    // place this center (or the checkpoint it resumed) knows counts once, and its later claims
    // are measured from there, so they neither count that work again nor leap past what one
    // window trains. A new holder of a place starts from the place's record.
    const std::uint64_t record = places_.trained(w->id);
    if (h.samples > options_.membership.max_samples_per_worker) ++stats_.rejected["implausible samples"];
    else if (h.samples > record && places_.known(w->id)) stats_.total_samples += h.samples - record;
    w->samples = w->exchanged_samples = h.samples > options_.membership.max_samples_per_worker ? record : std::max(record, h.samples);
    if (options_.membership.places_hold_shards && w->id >= std::uint32_t(options_.membership.expected_workers)) {
        w->placeless = true;
        std::fprintf(stderr, "%s: every place holds a live worker; worker %u has no untrained data to take over\n",
                     options_.name.c_str(), w->id);
    }
    places_.set(w->id, w->samples);
    if (lost_places_.erase(w->id)) ++stats_.places_retaken;
    by_peer_[peer] = w.get();
    workers_.push_back(std::move(w));
    ++stats_.workers_joined;
    all_silent_since_.reset();
    if (started_ || resumed_) {  // joining a run in progress, or coming back to a resumed center
        started_ = true;
        return welcome_or_hold(*workers_.back());
    }
    if (stats_.live_workers() < options_.membership.expected_workers) return;
    started_ = true;
    if (on_start) on_start();
    if (warming_up())
        std::printf("%s: warmstart: worker 0 trains alone until %llu samples (cluster.warmstart_samples); the other "
                    "workers wait\n", options_.name.c_str(), static_cast<unsigned long long>(options_.membership.warmstart_samples));
    for (auto& worker : workers_)
        if (worker->state == Worker::State::joining) welcome_or_hold(*worker);
}

bool Center::warming_up() const {
    if (options_.membership.warmstart_samples == 0 || warmstart_over_ || stats_.total_samples >= options_.membership.warmstart_samples)
        return false;
    for (const auto& [peer, w] : by_peer_)
        if (w->id == 0 && (w->state == Worker::State::active || w->state == Worker::State::joining)) return true;
    return false;
}

void Center::welcome_or_hold(Worker& w) {
    if (w.id == 0 || !warming_up()) return welcome(w);
    w.held = true;
    answer_heartbeat(w);  // with kFlagHeld: the worker's wait for its welcome starts again
}

void Center::release_held() {
    // Once over, over: a later worker 0 (a replacement) does not start another warmstart.
    if (options_.membership.warmstart_samples == 0 || warmstart_over_ || !started_ || warming_up()) return;
    warmstart_over_ = true;
    int released = 0;
    for (auto& w : workers_)
        if (w->held && w->state == Worker::State::joining) {
            w->held = false;
            welcome(*w);
            ++released;
        }
    if (released == 0) return;  // none was held (a resumed run past its warmstart)
    std::printf("%s: warmstart over at %llu samples%s: welcomed the %d workers held back\n", options_.name.c_str(),
                static_cast<unsigned long long>(stats_.total_samples),
                stats_.total_samples >= options_.membership.warmstart_samples ? "" : " (worker 0 left)", released);
    std::fflush(stdout);
}

std::uint32_t Center::free_worker_id(std::uint32_t preferred) const {
    // A worker coming back (after a restart of the center, or a loss) asks for its old id and
    // so keeps its shard; otherwise the lowest id no live peer holds: a worker that replaces a
    // lost one takes its shard.
    std::set<std::uint32_t> held;
    for (const auto& [peer, w] : by_peer_) held.insert(w->id);
    if (preferred != 0 && preferred < std::uint32_t(options_.membership.expected_workers) && !held.count(preferred)) return preferred;
    std::uint32_t id = 0;
    while (held.count(id)) ++id;
    return id;
}

void Center::answer_heartbeat(Worker& w) {
    // Tells a waiting worker that the center is alive (its waits are bounded by this), and
    // never waits itself: a peer that does not read loses the answer.
    Header h;
    h.type = MessageType::heartbeat;
    h.worker_id = w.id;
    h.center_version = state_.version;
    h.fingerprint = options_.fingerprint;
    if (w.held) h.flags |= kFlagHeld;
    try {
        const auto header = encode(h);
        endpoint_->send(w.peer, header, nullptr, 0);
        stats_.bytes_sent += header.size();
    } catch (const DeliveryError&) {
        ++stats_.replies_dropped;
    }
}

void Center::answer_settings(const std::string& peer, const Header& request) {
    Header h;
    h.type = MessageType::settings;
    h.sequence = request.sequence;
    send_text(peer, h, options_.agreed_settings);  // dropped: the asker times out, naming the server
}

bool Center::first_unknown_answer(const std::string& peer) {
    // A worker that waited out a center's restart has queued heartbeats from the outage; they
    // all arrive at once and are all "unknown worker". One answer tells it to join again; more
    // would fill its small-message queue (cluster_options.cpp: kSmallMessages) ahead of its
    // welcome, which then could not be queued and cost it its place. So: one answer per peer
    // per 500 ms. The map holds recent askers only (older entries go once it grows).
    const auto now = Clock::now();
    const auto window = std::chrono::milliseconds(500);
    if (unknown_answered_.size() > 4 * options_.membership.max_peers)
        for (auto it = unknown_answered_.begin(); it != unknown_answered_.end();)
            it = now - it->second > window ? unknown_answered_.erase(it) : std::next(it);
    const auto it = unknown_answered_.find(peer);
    if (it != unknown_answered_.end() && now - it->second <= window) return false;
    unknown_answered_[peer] = now;
    return true;
}

void Center::reject(const std::string& peer, std::uint32_t worker_id, const std::string& reason,
                    const std::string& detail) {
    ++stats_.rejected[reason];
    // Any rejection drops the sender's partly received exchange whole, whichever check failed.
    if (Worker* w = find(peer)) {
        if (w->from_worker) w->from_worker->drop();
        if (w->buffers_from) w->buffers_from->drop();
    }
    if (reason == "unknown worker" && !first_unknown_answer(peer)) return;  // counted, not answered
    const std::string text = reason + ": " + detail;
    if (rejections_logged_++ < 50)
        std::fprintf(stderr, "%s: rejected a message from worker %u: %s (x~ unchanged)\n", options_.name.c_str(), worker_id,
                     text.c_str());
    Header h;
    h.type = MessageType::error;
    h.worker_id = worker_id;
    h.center_version = state_.version;
    send_text(peer, h, text);
}

void Center::send_text(const std::string& peer, Header h, const std::string& text) {
    h.dtype = Dtype::utf8;
    h.fingerprint = options_.fingerprint;
    h.element_count = text.size();
    try {
        const auto header = encode(h);
        endpoint_->send(peer, header, text.data(), text.size());
        stats_.bytes_sent += header.size() + text.size();
    } catch (const DeliveryError&) {
        // Gone, or not reading (the center's sends never wait): counted, never retried.
        ++stats_.replies_dropped;
    }
}

void Center::forget(Worker& w) {
    // What it claimed beyond its last exchange (heartbeats while it trained) never reached x~:
    // that part leaves the count with it, so peers that only heartbeat add nothing in the end.
    stats_.total_samples -= w.samples - w.exchanged_samples;
    w.samples = w.exchanged_samples;
    places_.set(w.id, w.samples);
    by_peer_.erase(w.peer);
    w.pending = Payload();
    w.from_worker.reset();
    w.to_worker.reset();
    w.buffers_from.reset();  // its last buffers stay in b~ (center/buffer_average.hpp)
}

void Center::lose_disconnected() {
    Header h;
    h.type = MessageType::heartbeat;
    h.fingerprint = options_.fingerprint;
    for (auto& w : workers_) {
        if (w->state != Worker::State::active) continue;
        h.worker_id = w->id;
        h.center_version = state_.version;
        try {
            const auto header = encode(h);
            endpoint_->send(w->peer, header, nullptr, 0);  // a heartbeat answer: harmless to a live worker
            stats_.bytes_sent += header.size();
        } catch (const DeliveryError& e) {
            if (e.gone()) lose(*w, "its connection is closed, and a new worker asks for a place");
            else ++stats_.replies_dropped;
        }
    }
}

void Center::forgive_own_stall(Clock::time_point now) {
    const auto gap = now - last_liveness_check_;
    if (last_liveness_check_ != Clock::time_point() && gap > std::chrono::seconds(1))
        for (auto& w : workers_) {
            w->last_seen += gap;
            w->last_exchange += gap;
        }
    last_liveness_check_ = now;
}

bool Center::places_back(Clock::time_point join_deadline) const {
    // A resumed center welcomes each worker as it comes back, with no barrier, so the first to
    // come back may finish before the others have said hello: the run is not over until as
    // many workers as it has places have joined, or cluster.join_timeout_ms has passed.
    return !resumed_ || stats_.workers_joined >= options_.membership.expected_workers || Clock::now() > join_deadline;
}

bool Center::may_conclude(Clock::time_point now) const {
    return !all_silent_since_ || now > *all_silent_since_ + std::chrono::milliseconds(options_.end.center_restart_ms);
}

void Center::check_liveness() {
    const auto now = Clock::now();
    forgive_own_stall(now);
    const auto timeout = std::chrono::milliseconds(options_.membership.worker_timeout_ms);
    for (auto& w : workers_) {
        // Re-read each time: losing a worker may close the round.
        const bool round_waiting = rule_->synchronous() && !round_.empty() && now - round_opened_ > timeout;
        const bool waiting_for_us = w->in_round;
        if ((w->state == Worker::State::active || w->state == Worker::State::joining) && !waiting_for_us &&
            now - w->last_seen > timeout)
            lose(*w, "silent for more than " + std::to_string(options_.membership.worker_timeout_ms) + " ms (cluster.worker_timeout_ms)");
        else if (round_waiting && w->state == Worker::State::active && !waiting_for_us && now - w->last_exchange > timeout)
            // Heartbeats alone do not hold a synchronous round: a peer that joined but sends no
            // exchange counts as lost after the heartbeat timeout.
            lose(*w, "sent no exchange for more than " + std::to_string(options_.membership.worker_timeout_ms) +
                         " ms while a synchronous round waited on it (cluster.worker_timeout_ms)");
    }
}

void Center::prune_departed() {
    // A departed worker's record is dropped once no round refers to it, so a long run with
    // many joins and losses keeps only its live peers.
    workers_.erase(std::remove_if(workers_.begin(), workers_.end(),
                                  [](const std::unique_ptr<Worker>& w) {
                                      return (w->state == Worker::State::lost || w->state == Worker::State::finished) &&
                                             !w->in_round;
                                  }),
                   workers_.end());
}

void Center::lose(Worker& w, const std::string& why) {
    if (w.state == Worker::State::lost || w.state == Worker::State::finished) return;
    const bool welcomed = w.state == Worker::State::active;
    w.state = Worker::State::lost;
    rule_->on_leave(w.id);
    forget(w);
    if (!welcomed) {
        ++stats_.peers_dropped;
        std::fprintf(stderr, "%s: peer %u dropped before its welcome: %s\n", options_.name.c_str(), w.id, why.c_str());
        return;
    }
    const bool exchanged = w.accepted_sequence > 0;
    ++(exchanged ? stats_.workers_lost : stats_.workers_silent);
    if (exchanged) lost_places_.insert(w.id);  // a silent worker was never counted lost: nothing to take back
    std::fprintf(stderr, "%s: worker %u lost%s: %s; continuing with %d live workers\n", options_.name.c_str(), w.id,
                 exchanged ? "" : " before its first exchange", why.c_str(), stats_.live_workers());
    if (stats_.live_workers() == 0 && options_.end.center_restart_ms > 0) {
        all_silent_since_ = Clock::now();
        std::fprintf(stderr, "%s: every worker went silent; waiting up to %d ms (cluster.center_restart_ms) for them to come "
                     "back before the run ends\n", options_.name.c_str(), options_.end.center_restart_ms);
    }
    if (!round_.empty()) maybe_close_round(false);
}

void Center::count_samples(Worker& w, std::uint64_t samples, bool exchange) {
    // More than this worker's shard times the epochs, or more than it can have trained since
    // its last exchange: not believed, and counted.
    const std::uint64_t window = options_.membership.max_samples_per_window;
    if (samples > options_.membership.max_samples_per_worker || (window > 0 && samples > w.exchanged_samples + 2 * window) ||
        (w.placeless && samples > w.samples)) {
        ++stats_.rejected["implausible samples"];
        return;
    }
    if (exchange) w.exchanged_samples = std::max(w.exchanged_samples, samples);
    if (samples <= w.samples) return;  // a worker's count only grows
    stats_.total_samples += samples - w.samples;
    w.samples = samples;
    places_.set(w.id, samples);
}

}  // namespace tether
