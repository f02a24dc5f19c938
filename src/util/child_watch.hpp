// The worker processes a local run started, reaped as they end: the parent learns of a child's
// death at once (it is its parent), so a worker killed with -9 is counted lost now, naming the
// signal, not after cluster.worker_timeout_ms of silence.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "util/spawn.hpp"

namespace tether {

class ChildWatch {
public:
    // Watches `children` (started by this process) on a thread of its own, every 20 ms; calls
    // `ended(index, exit)` on that thread once for each child that ends before finish().
    ChildWatch(std::vector<pid_t> children, std::function<void(std::size_t, const ChildExit&)> ended);
    ~ChildWatch();
    ChildWatch(const ChildWatch&) = delete;
    ChildWatch& operator=(const ChildWatch&) = delete;
    // Stops watching and returns every child's exit, in order: those still running are waited
    // for until `deadline`, then ended (wait_or_kill).
    std::vector<ChildExit> finish(std::chrono::steady_clock::time_point deadline);

private:
    void stop();

    std::vector<pid_t> children_;
    std::function<void(std::size_t, const ChildExit&)> ended_;
    std::mutex mutex_;                              // exits_
    std::vector<std::optional<ChildExit>> exits_;  // set once reaped
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

}  // namespace tether
