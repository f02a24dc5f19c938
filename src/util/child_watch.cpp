#include "util/child_watch.hpp"

#include <sys/wait.h>

#include "util/spawn.hpp"

namespace tether {

ChildWatch::ChildWatch(std::vector<pid_t> children, std::function<void(std::size_t, const ChildExit&)> ended)
    : children_(std::move(children)), ended_(std::move(ended)), exits_(children_.size()) {
    thread_ = std::thread([this] {
        while (!stopping_.load(std::memory_order_acquire)) {
            for (std::size_t i = 0; i < children_.size(); ++i) {
                {
                    std::lock_guard<std::mutex> lock(mutex_);
                    if (exits_[i]) continue;
                }
                int status = 0;
                if (::waitpid(children_[i], &status, WNOHANG) != children_[i]) continue;
                const ChildExit exit = ChildExit::of(status);
                {
                    std::lock_guard<std::mutex> lock(mutex_);
                    exits_[i] = exit;
                }
                if (ended_) ended_(i, exit);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
}

ChildWatch::~ChildWatch() { stop(); }

void ChildWatch::stop() {
    stopping_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
}

std::vector<ChildExit> ChildWatch::finish(std::chrono::steady_clock::time_point deadline) {
    stop();
    std::vector<ChildExit> exits;
    for (std::size_t i = 0; i < children_.size(); ++i)
        exits.push_back(exits_[i] ? *exits_[i] : wait_or_kill(children_[i], deadline));
    return exits;
}

}  // namespace tether
