// A worker's view of a server that went silent. Past cluster.worker_timeout_ms of silence the
// server counts as lost, but the worker keeps trying for cluster.center_restart_ms of silence in
// all before it gives up: a center restarted with `tether server --resume`, a stalled center
// or a link down for a while costs the run time, not its workers. Meanwhile the worker probes
// less and less often (its probes queue while the link is down, and a queue that fills would
// fail its sends), and says what it waits for, less and less often.
#pragma once

#include <algorithm>
#include <chrono>

namespace tether {

class CenterOutage {
public:
    using ms = std::chrono::milliseconds;

    CenterOutage(int heartbeat_ms, int lost_ms, int restart_ms)
        : heartbeat_(heartbeat_ms), lost_(lost_ms), give_up_(std::max(lost_ms, restart_ms)), next_note_(lost_ms) {}

    // Whether the server is lost after `silent` of silence (the worker then waits for it).
    bool lost(ms silent) const { return silent > lost_; }
    // Whether the worker gives up on the server after `silent` of silence.
    bool give_up(ms silent) const { return silent > give_up_; }
    ms give_up_after() const { return give_up_; }
    // How long the worker waits between two heartbeats after `silent` of silence: heartbeat_ms
    // while the server answers, then a quarter of the silence so far (at most kMaxProbe), so a
    // long outage queues a few dozen probes, not one per heartbeat.
    ms probe_interval(ms silent) const {
        if (!lost(silent)) return heartbeat_;
        return std::max(heartbeat_, std::min(kMaxProbe, ms(silent.count() / 4)));
    }
    // Whether to say now that the worker waits (once it is lost, then each time the silence has
    // doubled); a word from the server starts the count again.
    bool note_due(ms silent) {
        if (!lost(silent) || silent < next_note_) return false;
        next_note_ = silent * 2;
        return true;
    }
    void heard() { next_note_ = lost_; }

private:
    static constexpr ms kMaxProbe{5000};
    ms heartbeat_, lost_, give_up_, next_note_;
};

}  // namespace tether
