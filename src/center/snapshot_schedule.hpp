// When the center hands x~ out: a snapshot for evaluation every snapshots.samples_per_snapshot
// samples and once more at the end (unless unchanged since the last one), a checkpoint on its
// own schedule (center/checkpoint_schedule.hpp), and the answers to requests for the final x~
// that wait until every worker has finished. The schedule decides; the center copies x~ and
// calls on_snapshot, on_checkpoint or the asker.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "center/center_options.hpp"
#include "center/checkpoint_schedule.hpp"
#include "protocol/header.hpp"

namespace tether {

class SnapshotSchedule {
public:
    using Clock = CheckpointSchedule::Clock;
    using Request = std::pair<std::string, Header>;  // peer, request
    // Requests for the final x~ waiting at once: a handful of lead servers at most.
    static constexpr std::size_t kMaxFinalRequests = 16;

    explicit SnapshotSchedule(const SnapshotOptions& options);

    // Whether a snapshot is due with `samples` counted and x~ at `version`; `final`: serve() ends.
    // A due snapshot counts as taken.
    bool due(std::uint64_t samples, std::uint64_t version, bool final);
    // Goes on from a checkpoint's samples: the next snapshot at the next multiple.
    void resume(std::uint64_t samples);

    // x~ is at `version` as serve() starts: the first checkpoint follows the next update.
    void start(std::uint64_t version) { checkpoints_.start(version); }
    bool checkpoint_due(Clock::time_point now, std::uint64_t version) { return checkpoints_.due(now, version); }
    void checkpoint_written(Clock::time_point now) { checkpoints_.written(now); }

    // A request for the final x~, kept until every worker has finished; false: too many wait.
    bool wait_for_end(const std::string& peer, const Header& request);
    // The waiting requests, to answer now.
    std::vector<Request> take_waiting();
    void final_answered() { final_answered_ = true; }
    bool answered_final() const { return final_answered_; }
    // Server 0 confirmed that the final x~ arrived (kFlagReceived).
    void final_received() { final_received_ = true; }
    bool received_final() const { return final_received_; }

private:
    SnapshotOptions options_;
    std::uint64_t next_samples_ = 0;
    std::pair<std::uint64_t, std::uint64_t> last_{~0ull, ~0ull};  // samples, version
    CheckpointSchedule checkpoints_;
    std::vector<Request> waiting_;
    bool final_answered_ = false;
    bool final_received_ = false;
};

}  // namespace tether
