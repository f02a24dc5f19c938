// What the center does with a refusal besides counting it (CenterStats::rejected) and answering
// it: whether the answer goes out at all, and whether it is printed. Decides; sends nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "protocol/error_code.hpp"

namespace tether {

class Refusals {
public:
    using Clock = std::chrono::steady_clock;

    // `max_peers`: how many recent askers of "unknown worker" it may remember before it forgets
    // the old ones (cluster.max_peers, four times over).
    explicit Refusals(std::size_t max_peers) : max_peers_(max_peers) {}

    // Whether `why` is answered to `peer` at `now`. A worker that waited out a center's restart
    // has queued heartbeats from the outage; they all arrive at once and are all unknown_worker.
    // One answer tells it to join again; more would fill its small-message queue
    // (cluster/cluster_transport.cpp) ahead of its welcome, which then could not be queued and
    // cost it its place. So unknown_worker is answered once per peer per 500 ms; every other
    // refusal always.
    bool answers(ErrorCode why, const std::string& peer, Clock::time_point now);
    // Whether a refusal is printed: the first 50 of the run (a hostile peer cannot fill the log).
    bool printed() { return printed_++ < 50; }

private:
    std::size_t max_peers_;
    std::map<std::string, Clock::time_point> unknown_answered_;  // peer -> its last unknown_worker answer
    int printed_ = 0;
};

}  // namespace tether
