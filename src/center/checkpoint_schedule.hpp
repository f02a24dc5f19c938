// When a center writes its checkpoint: kFirstDelay after the first update x~ takes (the first
// update of a resumed center too), then every cluster.checkpoint_seconds, and when serve()
// ends. A run killed in its first minute can then be resumed: waiting a whole period for the
// first checkpoint left nothing to resume from. Before the first update
// there is nothing a checkpoint would save that the run's start does not give again.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

namespace tether {

class CheckpointSchedule {
public:
    using Clock = std::chrono::steady_clock;
    // Long enough that a checkpoint of a large x~ is not written for every early exchange, short
    // enough that a crash in the first seconds of training loses little.
    static constexpr std::chrono::milliseconds kFirstDelay{2000};

    // period_ms <= 0: no periodic checkpoints (only the one when serve() ends).
    explicit CheckpointSchedule(int period_ms = 0) : period_(period_ms) {}
    // x~ is at `version` now (0, or a resumed checkpoint's): the first update is the next one.
    void start(std::uint64_t version) {
        start_version_ = version;
        next_.reset();
    }
    // Whether a checkpoint is due at `now`, x~ being at `version`.
    bool due(Clock::time_point now, std::uint64_t version) {
        if (period_.count() <= 0) return false;
        if (!next_ && version != start_version_) next_ = now + std::min(kFirstDelay, period_);
        return next_ && now >= *next_;
    }
    void written(Clock::time_point now) { next_ = now + period_; }

private:
    std::chrono::milliseconds period_;
    std::uint64_t start_version_ = 0;
    std::optional<Clock::time_point> next_;  // unset until the first update
};

}  // namespace tether
