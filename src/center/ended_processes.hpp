// Worker processes that ended, as the thread that reaped them tells the center (Center::
// lose_process) and the center's thread takes them between two messages. Safe from any thread.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tether {

class EndedProcesses {
public:
    struct Ended {
        std::string peer_prefix, why;
    };

    void add(std::string peer_prefix, std::string why) {
        std::lock_guard<std::mutex> lock(mutex_);
        ended_.push_back({std::move(peer_prefix), std::move(why)});
        any_ = true;
    }
    // What ended since the last take; without a lock while nothing did (once per tick).
    std::vector<Ended> take() {
        std::vector<Ended> out;
        if (!any_.load()) return out;
        std::lock_guard<std::mutex> lock(mutex_);
        out.swap(ended_);
        any_ = false;
        return out;
    }

private:
    std::mutex mutex_;
    std::vector<Ended> ended_;
    std::atomic<bool> any_{false};
};

}  // namespace tether
