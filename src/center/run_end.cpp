#include "center/run_end.hpp"

#include <cstdio>
#include <stdexcept>

namespace tether {

RunEnd::RunEnd(const RunEndOptions& options, const MembershipOptions& membership, std::string name)
    : options_(options), expected_workers_(membership.expected_workers), join_timeout_ms_(membership.join_timeout_ms),
      name_(std::move(name)) {}

void RunEnd::start(Clock::time_point now) { join_deadline_ = now + std::chrono::milliseconds(join_timeout_ms_); }

void RunEnd::check_started(bool started, const CenterStats& stats, Clock::time_point now, const std::string& address) const {
    if (started || now <= join_deadline_) return;
    throw std::runtime_error(name_ + " at " + address + ": only " + std::to_string(stats.workers_joined) + " of " +
                             std::to_string(expected_workers_) + " workers joined within " +
                             std::to_string(join_timeout_ms_) +
                             " ms (cluster.join_timeout_ms); are the workers running and pointed here?");
}

void RunEnd::all_silent(Clock::time_point now, bool finished) {
    if (options_.center_restart_ms <= 0) return;
    all_silent_since_ = now;
    std::fprintf(stderr, "%s: %s; waiting up to %d ms (cluster.center_restart_ms) for %s to come back before the run ends\n",
                 name_.c_str(), finished ? "the live workers finished while a lost one's place is untrained" : "every worker went silent",
                 options_.center_restart_ms, finished ? "it" : "them");
}

bool RunEnd::over(bool started, bool resumed, const CenterStats& stats, Clock::time_point now) const {
    if (!started || stats.live_workers() != 0) return false;
    if (all_silent_since_ && now <= *all_silent_since_ + std::chrono::milliseconds(options_.center_restart_ms)) return false;
    // A resumed center's first worker back may finish before the others have said hello.
    return !resumed || stats.workers_joined >= expected_workers_ || now > join_deadline_;
}

bool RunEnd::leaves(bool final_answered, bool final_received, Clock::time_point now) {
    if (!options_.await_final_snapshot || final_received) return true;
    if (!over_at_) over_at_ = now;
    // The answer gets its own join_timeout_ms to arrive and be confirmed, however late it was asked for.
    if (final_answered && !answered_at_) answered_at_ = now;
    const Clock::time_point from = answered_at_ ? *answered_at_ : *over_at_;
    if (now <= from + std::chrono::milliseconds(join_timeout_ms_)) return false;
    const std::string wait = std::to_string(join_timeout_ms_) + " ms (cluster.join_timeout_ms)";
    final_missing_ = final_answered
        ? name_ + ": server 0 did not confirm within " + wait + " that the final x~ this server sent arrived: its "
          "range may be missing from the run's final model"
        : name_ + ": no request for the final x~ within " + wait + " of the last worker leaving: the run's final "
          "model lacks this server's range (is server 0 running?)";
    std::fprintf(stderr, "%s\n", final_missing_.c_str());
    return true;
}

}  // namespace tether
