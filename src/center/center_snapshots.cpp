// What the center hands out of x~: snapshots for evaluation (on a schedule of samples, and at
// the end), copies for other threads, answers to `snapshot` requests from other processes (a
// lead server assembling x~ from every server range), and checkpoints.
#include <cstring>
#include <stdexcept>

#include "center/center.hpp"
#include "center/center_worker.hpp"
#include "center/checkpoint.hpp"

namespace tether {

std::uint64_t CenterStats::rejected_total() const {
    std::uint64_t total = 0;
    for (const auto& [reason, count] : rejected) total += count;
    return total;
}

nlohmann::json CenterStats::to_json() const {
    return {{"updates_applied", updates_applied},
            {"exchanges", exchanges},
            {"rounds", rounds},
            {"late_reports", late_reports},
            {"rejected_messages", rejected_total()},
            {"rejected_by_reason", rejected},
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
}

void Center::resume(const Checkpoint& c) {
    state_.x = c.x;
    state_.version = c.version;
    stats_.updates_applied = c.updates_applied;
    stats_.exchanges = c.exchanges;
    stats_.rounds = c.rounds;
    stats_.total_samples = c.total_samples;
    places_.restore(c.places);
    // b~ goes on from the checkpoint's; one written before buffers existed (format 1), or by a
    // center without them, leaves b~(0).
    if (!c.buffers.empty()) {
        if (c.buffers.size() != buffers_.size())
            throw std::runtime_error("checkpoint holds " + std::to_string(c.buffers.size()) + " buffer elements, this " +
                                     options_.name + " " + std::to_string(buffers_.size()) +
                                     "; it belongs to a run of another model");
        buffers_.restore(c.buffers);
    }
    next_snapshot_samples_ = options_.snapshots.samples_per_snapshot
                                 ? (c.total_samples / options_.snapshots.samples_per_snapshot + 1) * options_.snapshots.samples_per_snapshot
                                 : 0;
    resumed_ = true;
    // What progress displays and the run directory read go on from the checkpoint too.
    live_samples_.store(c.total_samples, std::memory_order_relaxed);
    live_version_.store(c.version, std::memory_order_relaxed);
}

Checkpoint Center::checkpoint() const {
    Checkpoint c;
    c.fingerprint = options_.fingerprint;
    c.version = state_.version;
    c.updates_applied = stats_.updates_applied;
    c.exchanges = stats_.exchanges;
    c.rounds = stats_.rounds;
    c.total_samples = stats_.total_samples;
    c.places = places_.all();
    c.x = state_.x;
    c.buffers = buffers_.mean();
    return c;
}

CenterState Center::snapshot_now() const {
    std::lock_guard<std::mutex> lock(state_mutex_);
    return state_;
}

CenterStats Center::stats_now() const {
    std::lock_guard<std::mutex> lock(state_mutex_);
    return stats_;
}

void Center::maybe_snapshot(bool final) {
    const std::uint64_t total = stats_.total_samples;
    live_samples_.store(total, std::memory_order_relaxed);
    live_version_.store(state_.version, std::memory_order_relaxed);
    if (!on_snapshot) return;
    const bool due = options_.snapshots.samples_per_snapshot && total >= next_snapshot_samples_;
    // The last periodic snapshot often is the final state already; evaluate it once.
    const bool unchanged = total == last_snapshot_.first && state_.version == last_snapshot_.second;
    if (!due && !(final && !unchanged)) return;
    last_snapshot_ = {total, state_.version};
    if (due) next_snapshot_samples_ = (total / options_.snapshots.samples_per_snapshot + 1) * options_.snapshots.samples_per_snapshot;
    on_snapshot(Snapshot{state_.x, state_.version, stats_});
}

void Center::answer_snapshot(const std::string& peer, const Header& request) {
    const bool done = started_ && stats_.live_workers() == 0;
    if ((request.flags & kFlagFinal) && !done) {
        // Answered when every worker has finished; a handful of such peers at most.
        if (final_requests_.size() >= 16)
            return reject(peer, 0, "too many requests", "16 requests for the final x~ are already waiting");
        final_requests_.emplace_back(peer, request);
        return;
    }
    Header h;
    h.type = MessageType::snapshot;
    h.sequence = request.sequence;
    h.samples = stats_.total_samples;
    Payload x = Payload::allocate(state_.x.size() * sizeof(float));
    std::memcpy(x.data(), state_.x.data(), x.size());
    try {
        send_chunks(peer, h, x, float32_out_);
    } catch (const DeliveryError&) {
        ++stats_.replies_dropped;  // the center never waits on a peer; the asker times out
    }
    if (request.flags & kFlagFinal) final_answered_ = true;
}

void Center::answer_final_snapshots() {
    std::vector<std::pair<std::string, Header>> waiting;
    waiting.swap(final_requests_);
    for (const auto& [peer, request] : waiting) answer_snapshot(peer, request);
}

}  // namespace tether
