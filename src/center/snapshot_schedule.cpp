#include "center/snapshot_schedule.hpp"

namespace tether {

SnapshotSchedule::SnapshotSchedule(const SnapshotOptions& options)
    : options_(options), next_samples_(options.samples_per_snapshot), checkpoints_(options.checkpoint_ms) {}

bool SnapshotSchedule::due(std::uint64_t samples, std::uint64_t version, bool final) {
    const bool periodic = options_.samples_per_snapshot && samples >= next_samples_;
    // The last periodic snapshot often is the final state already; evaluate it once.
    const bool unchanged = samples == last_.first && version == last_.second;
    if (!periodic && !(final && !unchanged)) return false;
    last_ = {samples, version};
    if (periodic) resume(samples);
    return true;
}

void SnapshotSchedule::resume(std::uint64_t samples) {
    next_samples_ = options_.samples_per_snapshot
                        ? (samples / options_.samples_per_snapshot + 1) * options_.samples_per_snapshot
                        : 0;
}

bool SnapshotSchedule::wait_for_end(const std::string& peer, const Header& request) {
    if (waiting_.size() >= kMaxFinalRequests) return false;
    waiting_.emplace_back(peer, request);
    return true;
}

std::vector<SnapshotSchedule::Request> SnapshotSchedule::take_waiting() {
    std::vector<Request> waiting;
    waiting.swap(waiting_);
    return waiting;
}

}  // namespace tether
