// When a center's run is over. It must start (every expected worker joined) within
// membership.join_timeout_ms. It is over once no worker is live, but not while every worker went
// silent less than end.center_restart_ms ago (they may come back: a link down, a stall), and for a
// resumed center, which welcomes each worker as it comes back with no barrier, not before as many
// workers as it has places have joined (or the join timeout passed). A server that waits for the
// lead's request for the final x~ (end.await_final_snapshot) leaves once the lead confirmed that
// the answer arrived, or join_timeout_ms after the run was over (after its answer, if it answered). RunEnd decides from the counters; it calls nothing.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "center/center_options.hpp"
#include "center/center_stats.hpp"

namespace tether {

class RunEnd {
public:
    using Clock = std::chrono::steady_clock;

    RunEnd(const RunEndOptions& options, const MembershipOptions& membership, std::string name);

    // serve() starts at `now`: the join deadline runs from here.
    void start(Clock::time_point now);
    // Throws, naming `address`, when the run has not started by the join deadline.
    void check_started(bool started, const CenterStats& stats, Clock::time_point now, const std::string& address) const;
    // The last live worker was lost (or, `finished`, said bye) while a worker that trained is
    // lost and its place not taken back: the restart window opens.
    void all_silent(Clock::time_point now, bool finished = false);
    // A worker joined: the restart window, if open, is over.
    void joined() { all_silent_since_.reset(); }
    // Whether the run is over at `now`.
    bool over(bool started, bool resumed, const CenterStats& stats, Clock::time_point now) const;
    // Once over: whether serve() may leave, the final x~ having been answered (`final_answered`)
    // and its arrival confirmed (`final_received`), or not.
    bool leaves(bool final_answered, bool final_received, Clock::time_point now);
    // Once serve() left: why server 0 may not hold this server's final range ("" when it
    // confirmed it, or none was awaited). A run whose x~ lost a range has failed.
    const std::string& final_missing() const { return final_missing_; }

private:
    RunEndOptions options_;
    int expected_workers_, join_timeout_ms_;
    std::string name_;
    Clock::time_point join_deadline_;
    std::optional<Clock::time_point> all_silent_since_;  // the last live worker was lost (not finished)
    std::optional<Clock::time_point> over_at_;            // the run was first seen over
    std::optional<Clock::time_point> answered_at_;        // the final x~ was first seen answered
    std::string final_missing_;
};

}  // namespace tether
