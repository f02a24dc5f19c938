// What the center hands out of x~: snapshots for evaluation (on a schedule of samples, and at
// the end), copies for other threads, answers to `snapshot` requests from other processes (a
// lead server assembling x~ from every server range), and checkpoints.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "center/center.hpp"
#include "center/center_worker.hpp"
#include "center/checkpoint.hpp"

namespace tether {

std::uint64_t CenterStats::rejected_total() const {
    std::uint64_t total = 0;
    for (const auto& [code, count] : rejected) total += count;
    return total;
}

nlohmann::json CenterStats::to_json() const {
    nlohmann::json by_reason = nlohmann::json::object();
    for (const auto& [code, count] : rejected) by_reason[to_string(code)] = count;
    nlohmann::json out = {{"updates_applied", updates_applied},
            {"exchanges", exchanges},
            {"rounds", rounds},
            {"late_reports", late_reports},
            {"rejected_messages", rejected_total()},
            {"rejected_by_reason", by_reason},
            {"workers_joined", workers_joined},
            {"workers_finished", workers_finished},
            {"workers_lost", workers_lost},
            {"peers_dropped", peers_dropped},
            {"places_retaken", places_retaken},
            {"workers_silent", workers_silent},
            {"live_workers", live_workers()},
            {"bytes_received", bytes_received},
            {"bytes_sent", bytes_sent},
            {"replies_dropped", replies_dropped},
            {"mean_staleness", staleness_count ? staleness_sum / double(staleness_count) : 0.0},
            {"max_staleness", staleness_max}};
    nlohmann::json shares = nlohmann::json::object();
    for (const auto& [id, samples] : worker_samples) shares[std::to_string(id)] = samples;
    out["worker_samples"] = shares;
    if (!finished_at.empty()) {
        std::chrono::steady_clock::time_point last = finished_at.begin()->second;
        for (const auto& [id, at] : finished_at) last = std::max(last, at);
        nlohmann::json idle = nlohmann::json::object();
        for (const auto& [id, at] : finished_at) idle[std::to_string(id)] = std::chrono::duration<double>(last - at).count();
        out["worker_idle_seconds"] = idle;
    }
    if (leases.on)
        out["leases"] = {{"positions", leases.positions}, {"granted", leases.granted}, {"returned_blocks", leases.returned_blocks},
                         {"returned_positions", leases.returned_positions}, {"served_again", leases.served_again}};
    if (resumed) {
        out["resumed_at_version"] = resumed_version;
        out["rolled_back_updates"] = rolled_back_updates;
    }
    return out;
}

void Center::resume(const Checkpoint& c) {
    updates_.resume(c.x, c.version);
    stats_.resumed = true;
    stats_.resumed_version = c.version;
    stats_.updates_applied = c.updates_applied;
    stats_.exchanges = c.exchanges;
    stats_.rounds = c.rounds;
    stats_.total_samples = c.total_samples;
    membership_.resume(c.places);
    // b~ goes on from the checkpoint's; one written before buffers existed (format 1), or by a
    // center without them, leaves b~(0).
    if (!c.buffers.empty()) {
        if (c.buffers.size() != buffers_.size())
            throw std::runtime_error("checkpoint holds " + std::to_string(c.buffers.size()) + " buffer elements, this " +
                                     options_.name + " " + std::to_string(buffers_.size()) +
                                     "; it belongs to a run of another model");
        buffers_.restore(c.buffers);
    }
    snapshots_.resume(c.total_samples);
    // What progress displays and the run directory read go on from the checkpoint too.
    live_samples_.store(c.total_samples, std::memory_order_relaxed);
    live_version_.store(c.version, std::memory_order_relaxed);
}

Checkpoint Center::checkpoint() const {
    Checkpoint c;
    c.fingerprint = options_.fingerprint;
    c.version = updates_.version();
    c.updates_applied = stats_.updates_applied;
    c.exchanges = stats_.exchanges;
    c.rounds = stats_.rounds;
    c.total_samples = stats_.total_samples;
    c.places = membership_.places();
    c.x = updates_.state().x;
    c.buffers = buffers_.mean();
    return c;
}

CenterState Center::snapshot_now(std::vector<float>* buffers) const {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (buffers) *buffers = buffers_.mean();
    return updates_.state();
}

CenterStats Center::stats_now() const {
    std::lock_guard<std::mutex> lock(state_mutex_);
    return stats_;
}

void Center::maybe_snapshot(bool final) {
    const std::uint64_t total = stats_.total_samples;
    live_samples_.store(total, std::memory_order_relaxed);
    live_version_.store(updates_.version(), std::memory_order_relaxed);
    if (!on_snapshot || !snapshots_.due(total, updates_.version(), final)) return;
    on_snapshot(Snapshot{updates_.state().x, updates_.version(), stats_});
}

void Center::handle_snapshot(const std::string& peer, const Worker* w, const Header& request, const Frames& frames) {
    // x~ goes only to whom the run trusts with it: a joined worker (which holds x~ anyway), or
    // any peer where every peer is trusted (SnapshotOptions::snapshots_for_any_peer).
    if (!options_.snapshots.snapshots_for_any_peer && !(w && w->state == Worker::State::active))
        return reject(peer, request.worker_id, ErrorCode::not_joined,
                      "only a joined worker, or with CURVE a peer holding an allowed key, may ask for x~");
    // A server that waits for the final request leaves once it is answered: only server 0's.
    if ((request.flags & kFlagFinal) && !admits_final_request(peer, request, frames)) return;
    if (request.flags & kFlagReceived) {
        // Server 0 has this server's final range: nothing of it is left on the link.
        if (request.flags & kFlagFinal) snapshots_.final_received();
        return;
    }
    answer_snapshot(peer, request);
}

void Center::answer_snapshot(const std::string& peer, const Header& request) {
    const bool done = membership_.started() && stats_.live_workers() == 0;
    if ((request.flags & kFlagFinal) && !done) {
        // Answered when every worker has finished.
        if (!snapshots_.wait_for_end(peer, request))
            return reject(peer, 0, ErrorCode::too_many_requests,
                          std::to_string(SnapshotSchedule::kMaxFinalRequests) +
                              " requests for the final x~ are already waiting");
        return;
    }
    Header h;
    h.type = MessageType::snapshot;
    h.sequence = request.sequence;
    h.samples = stats_.total_samples;
    h.center_version = updates_.state().version;  // server 0 keeps it beside a final range (record/server_records.hpp)
    const std::vector<float>& x = updates_.state().x;
    Payload copy = Payload::allocate(x.size() * sizeof(float));
    std::memcpy(copy.data(), x.data(), copy.size());
    try {
        send_chunks(peer, h, copy, float32_out_);
    } catch (const DeliveryError&) {
        ++stats_.replies_dropped;  // the center never waits on a peer; the asker times out
    }
    if (request.flags & kFlagFinal) snapshots_.final_answered();
}

void Center::answer_final_snapshots() {
    for (const auto& [peer, request] : snapshots_.take_waiting()) answer_snapshot(peer, request);
}

}  // namespace tether
