// Membership (center/membership.hpp): the peers' records from hello to departure. State for a
// peer lives from its hello to its bye, loss or refusal, and no longer; the number of peers held
// at once is capped by the center before it asks for a join.
#include "center/membership.hpp"

#include <algorithm>
#include <cstdio>

namespace tether {

Membership::Membership(const MembershipOptions& options, CenterStats& stats, std::string name)
    : options_(options), stats_(stats), name_(std::move(name)), leases_(stats.leases, options.lease_positions) {
}

CenterWorker* Membership::find(const std::string& peer) {
    const auto it = by_peer_.find(peer);
    return it == by_peer_.end() ? nullptr : it->second;
}

bool Membership::full() const {
    // A place freed by a lost or finished worker may be taken again; more than cluster.workers
    // only with cluster.elastic.
    return !options_.elastic && stats_.live_workers() >= options_.expected_workers;
}

bool Membership::id_held(std::uint32_t id, const std::string& peer) const {
    for (const auto& [other, w] : by_peer_)
        if (other != peer && w->id == id && w->live()) return true;
    return false;
}

std::pair<CenterWorker*, Membership::Joined> Membership::join(const std::string& peer, const Header& h) {
    auto w = std::make_unique<CenterWorker>();
    w->peer = peer;
    w->id = options_.ids_from_hello ? h.worker_id : free_worker_id(h.worker_id);
    w->last_seen = Clock::now();
    // A worker coming back says what it trained before: what it trained beyond the record of a
    // place this center (or the checkpoint it resumed) knows counts once, and its later claims
    // are measured from there, so they neither count that work again nor leap past what one
    // window trains. A new holder of a place starts from the place's record.
    const std::uint64_t record = places_.trained(w->id);
    if (h.samples > options_.max_samples_per_worker) ++stats_.rejected[ErrorCode::implausible_samples];
    else if (h.samples > record && places_.known(w->id)) stats_.total_samples += h.samples - record;
    w->samples = w->exchanged_samples = h.samples > options_.max_samples_per_worker ? record : std::max(record, h.samples);
    if (options_.places_hold_shards && w->id >= std::uint32_t(options_.expected_workers)) {
        w->placeless = true;
        std::fprintf(stderr, "%s: every place holds a live worker; worker %u has no untrained data to take over\n",
                     name_.c_str(), w->id);
    }
    places_.set(w->id, w->samples);
    if (lost_places_.erase(w->id)) ++stats_.places_retaken;
    CenterWorker* joined = w.get();
    by_peer_[peer] = joined;
    workers_.push_back(std::move(w));
    ++stats_.workers_joined;
    if (started_ || resumed_) {  // joining a run in progress, or coming back to a resumed center
        started_ = true;
        return {joined, Joined::joins_run};
    }
    if (stats_.live_workers() < options_.expected_workers) return {joined, Joined::waits};
    started_ = true;
    return {joined, Joined::starts_run};
}

std::vector<CenterWorker*> Membership::joining() const {
    std::vector<CenterWorker*> waiting;
    for (const auto& w : workers_)
        if (w->state == CenterWorker::State::joining) waiting.push_back(w.get());
    return waiting;
}

void Membership::welcomed(CenterWorker& w, Clock::time_point now) {
    w.state = CenterWorker::State::active;
    w.last_seen = w.last_exchange = now;
}

bool Membership::warming_up() const {
    if (options_.warmstart_samples == 0 || warmstart_over_ || stats_.total_samples >= options_.warmstart_samples)
        return false;
    for (const auto& [peer, w] : by_peer_)
        if (w->id == 0 && w->live()) return true;
    return false;
}

bool Membership::hold(CenterWorker& w) {
    if (w.id == 0 || !warming_up()) return false;
    w.held = true;
    return true;
}

std::vector<CenterWorker*> Membership::release_held() {
    // Once over, over: a later worker 0 (a replacement) does not start another warmstart.
    if (options_.warmstart_samples == 0 || warmstart_over_ || !started_ || warming_up()) return {};
    warmstart_over_ = true;
    std::vector<CenterWorker*> released;
    for (auto& w : workers_)
        if (w->held && w->state == CenterWorker::State::joining) {
            w->held = false;
            released.push_back(w.get());
        }
    if (released.empty()) return released;  // none was held (a resumed run past its warmstart)
    std::printf("%s: warmstart over at %llu samples%s: welcomed the %zu workers held back\n", name_.c_str(),
                static_cast<unsigned long long>(stats_.total_samples),
                stats_.total_samples >= options_.warmstart_samples ? "" : " (worker 0 left)", released.size());
    std::fflush(stdout);
    return released;
}

std::uint32_t Membership::free_worker_id(std::uint32_t preferred) const {
    // A worker coming back (after a restart of the center, or a loss) asks for its old id and
    // so keeps its shard; otherwise a lost worker's place (its untrained data waits for one:
    // a restarted worker given a finished place instead would train nothing while the lost
    // place stayed untrained), else the lowest id no live peer holds.
    std::set<std::uint32_t> held;
    for (const auto& [peer, w] : by_peer_) held.insert(w->id);
    if (preferred != 0 && preferred < std::uint32_t(options_.expected_workers) && !held.count(preferred)) return preferred;
    for (std::uint32_t lost : lost_places_)
        if (!held.count(lost)) return lost;
    std::uint32_t id = 0;
    while (held.count(id)) ++id;
    return id;
}

void Membership::forgive_own_stall(Clock::time_point now) {
    const auto gap = now - last_liveness_check_;
    if (last_liveness_check_ != Clock::time_point() && gap > std::chrono::seconds(1))
        for (auto& w : workers_) {
            w->last_seen += gap;
            w->last_exchange += gap;
        }
    last_liveness_check_ = now;
}

std::optional<Membership::Silence> Membership::next_silent(Clock::time_point now,
                                                           std::optional<Clock::time_point> round_opened) const {
    const auto timeout = std::chrono::milliseconds(options_.worker_timeout_ms);
    const bool round_waiting = round_opened && now - *round_opened > timeout;
    for (const auto& w : workers_) {
        const bool waiting_for_us = w->in_round;
        if (w->live() && !waiting_for_us && now - w->last_seen > timeout)
            return Silence{w.get(), "silent for more than " + std::to_string(options_.worker_timeout_ms) +
                                        " ms (cluster.worker_timeout_ms)"};
        if (round_waiting && w->state == CenterWorker::State::active && !waiting_for_us && now - w->last_exchange > timeout)
            // Heartbeats alone do not hold a synchronous round: a peer that joined but sends no
            // exchange counts as lost after the heartbeat timeout.
            return Silence{w.get(), "sent no exchange for more than " + std::to_string(options_.worker_timeout_ms) +
                                        " ms while a synchronous round waited on it (cluster.worker_timeout_ms)"};
    }
    return std::nullopt;
}

Membership::Loss Membership::lose(CenterWorker& w, const std::string& why) {
    if (w.gone()) return Loss::none;
    const bool welcomed = w.state == CenterWorker::State::active;
    w.state = CenterWorker::State::lost;
    forget(w);
    if (!welcomed) {
        ++stats_.peers_dropped;
        std::fprintf(stderr, "%s: peer %u dropped before its welcome: %s\n", name_.c_str(), w.id, why.c_str());
        return Loss::dropped;
    }
    const bool exchanged = w.accepted_sequence > 0;
    ++(exchanged ? stats_.workers_lost : stats_.workers_silent);
    if (exchanged) lost_places_.insert(w.id);  // a silent worker was never counted lost: nothing to take back
    std::fprintf(stderr, "%s: worker %u lost%s: %s; continuing with %d live workers\n", name_.c_str(), w.id,
                 exchanged ? "" : " before its first exchange", why.c_str(), stats_.live_workers());
    return Loss::lost;
}

void Membership::finish(CenterWorker& w, std::uint64_t samples) {
    count_samples(w, samples);
    w.state = CenterWorker::State::finished;
    ++stats_.workers_finished;
    stats_.finished_at[w.id] = Clock::now();
    forget(w);
}

void Membership::forget(CenterWorker& w) {
    // What it claimed beyond its last exchange (heartbeats while it trained) never reached x~:
    // that part leaves the count with it, so peers that only heartbeat add nothing in the end.
    stats_.total_samples -= w.samples - w.exchanged_samples;
    w.samples = w.exchanged_samples;
    places_.set(w.id, w.samples);
    if (const auto share = stats_.worker_samples.find(w.id); share != stats_.worker_samples.end()) share->second = w.samples;
    leases_.release(w.id, w.exchanged_samples);  // what it leased and did not exchange goes back
    by_peer_.erase(w.peer);
    w.from_worker.reset();
    w.to_worker.reset();
    w.buffers_from.reset();  // its last buffers stay in b~ (center/buffer_average.hpp)
}

void Membership::prune() {
    // A departed worker's record is dropped once no round refers to it, so a long run with
    // many joins and losses keeps only its live peers.
    workers_.erase(std::remove_if(workers_.begin(), workers_.end(),
                                  [](const std::unique_ptr<CenterWorker>& w) { return w->gone() && !w->in_round; }),
                   workers_.end());
}

void Membership::count_samples(CenterWorker& w, std::uint64_t samples, bool exchange) {
    // More than this worker's shard times the epochs, or more than it can have trained since
    // its last exchange: not believed, and counted.
    const std::uint64_t window = options_.max_samples_per_window;
    if (samples > options_.max_samples_per_worker || (window > 0 && samples > w.exchanged_samples + 2 * window) ||
        (w.placeless && samples > w.samples)) {
        ++stats_.rejected[ErrorCode::implausible_samples];
        return;
    }
    if (exchange) w.exchanged_samples = std::max(w.exchanged_samples, samples);
    if (samples <= w.samples) return;  // a worker's count only grows
    stats_.total_samples += samples - w.samples;
    w.samples = samples;
    stats_.worker_samples[w.id] = samples;
    places_.set(w.id, samples);
}

void Membership::resume(std::map<std::uint32_t, std::uint64_t> places) {
    places_.restore(std::move(places));
    resumed_ = true;
}

}  // namespace tether
