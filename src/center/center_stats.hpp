// The center's counters: what it received, applied and refused, and who joined, finished and
// was lost. Each part counts its own (center/membership.hpp the workers and samples,
// center/update_path.hpp the exchanges and updates); the center the bytes and refusals.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "protocol/error_code.hpp"

namespace tether {

// The data's leases (cluster.leases, center/leases.hpp), server 0's: the run's positions (0:
// unbounded), those handed out, and those a departed worker gave back, in blocks, and that were
// handed out again.
struct LeaseCounts {
    bool on = false;
    std::uint64_t positions = 0, granted = 0, returned_blocks = 0, returned_positions = 0, served_again = 0;
};

struct CenterStats {
    std::uint64_t updates_applied = 0;
    std::uint64_t exchanges = 0;
    std::uint64_t rounds = 0;
    std::uint64_t late_reports = 0;
    std::map<ErrorCode, std::uint64_t> rejected;  // by kind; summary.json names them (to_string)
    int workers_joined = 0, workers_finished = 0, workers_lost = 0;
    // Peers that said hello but went silent before their welcome: never the run's workers, so
    // not lost workers either (a flood of them must not fail a healthy run).
    int peers_dropped = 0;
    // Lost workers whose place (worker id) a worker later took back (a restart, a rejoin after
    // an outage): the place's data was trained after all, so they fail nothing.
    int places_retaken = 0;
    // Workers welcomed but lost before their first accepted exchange: they moved nothing in x~,
    // as a flooder that took a place and went quiet does. Not in workers_lost; where the plan is
    // known, their untrained data shows in trained_share instead (record/run_verdict.hpp).
    int workers_silent = 0;
    std::uint64_t bytes_received = 0, bytes_sent = 0;
    double staleness_sum = 0;
    std::uint64_t staleness_count = 0;
    std::uint64_t staleness_max = 0;
    // Samples the workers trained: what their exchanges claimed, plus what live workers said
    // (heartbeats) they trained since their last exchange (dropped when they leave).
    std::uint64_t total_samples = 0;
    // Each place's (worker id's) share of them: with a run budget (cluster.budget_samples), fast
    // workers' shares are the larger.
    std::map<std::uint32_t, std::uint64_t> worker_samples;
    LeaseCounts leases;
    // When each worker said bye, by worker id: summary.json's worker_idle_seconds is each one's
    // wait from its bye to the last one's, its idle time at the end of the run.
    std::map<std::uint32_t, std::chrono::steady_clock::time_point> finished_at;
    // Replies (rejections, heartbeat answers) dropped because the peer was not reading: the
    // center never waits on a peer.
    std::uint64_t replies_dropped = 0;
    // A resumed center: the checkpoint's version, and how many updates x~ had gained after it
    // that the resume lost, as the rejoining workers' hellos tell (the version each last pulled,
    // less the checkpoint's; the largest). In summary.json only when resumed.
    bool resumed = false;
    std::uint64_t resumed_version = 0, rolled_back_updates = 0;

    std::uint64_t rejected_total() const;
    int live_workers() const { return workers_joined - workers_finished - workers_lost - peers_dropped - workers_silent; }
    nlohmann::json to_json() const;
};

}  // namespace tether
