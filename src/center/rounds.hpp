// A synchronous strategy's rounds: which workers' exchanges the open round holds, since when,
// and whether it may close. A round closes when every live worker has reported, or at its
// deadline (rounds.round_timeout_ms) with at least a quorum of them; a contributor lost while
// waiting still counts towards x~ (its x_i is in the round) but not towards the live workers
// the round waits for. Rounds decide; the update path closes x~'s round and the center replies.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "center/center_options.hpp"
#include "center/center_worker.hpp"

namespace tether {

class Rounds {
public:
    using Clock = CenterWorker::Clock;

    explicit Rounds(const RoundOptions& options) : options_(options) {}

    bool open() const { return !round_.empty(); }
    // When the open round took its first exchange; unset when none is open.
    std::optional<Clock::time_point> opened() const;
    // `w`'s exchange is in the open round (opened now if none was): it waits for the reply.
    void add(CenterWorker& w, Clock::time_point now);
    bool past_deadline(Clock::time_point now) const;
    // Whether the open round may close with `live` workers in the run.
    bool complete(int live, bool deadline_passed) const;
    // Closes the open round: its contributors, each marked answered (and heard from at `now`:
    // it was waiting on the center, not silent).
    std::vector<CenterWorker*> close(Clock::time_point now);

private:
    RoundOptions options_;
    std::vector<CenterWorker*> round_;  // contributors of the open round
    Clock::time_point opened_;
};

}  // namespace tether
