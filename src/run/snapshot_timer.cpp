#include "run/snapshot_timer.hpp"

#include <chrono>
#include <cstdio>
#include <exception>

namespace tether {

SnapshotTimer::SnapshotTimer(double every_seconds, std::function<bool()> due, std::function<void()> take)
    : every_seconds_(every_seconds), due_(std::move(due)), take_(std::move(take)) {}

SnapshotTimer::~SnapshotTimer() { stop(); }

void SnapshotTimer::start() {
    if (every_seconds_ > 0 && !thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void SnapshotTimer::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void SnapshotTimer::loop() {
    using Clock = std::chrono::steady_clock;
    const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(every_seconds_));
    std::unique_lock<std::mutex> lock(mutex_);
    auto next = Clock::now() + period;
    while (!wake_.wait_until(lock, next, [this] { return stopping_; })) {
        // The next period counts from now: a tick that ran late (a loaded machine) is not
        // followed by a burst of catch-up snapshots.
        next = Clock::now() + period;
        lock.unlock();
        try {
            if (due_()) take_();
        } catch (const std::exception& e) {
            // A point of the curve lost; the run and the evaluations by samples go on.
            std::fprintf(stderr, "evaluation by eval.every_seconds skipped: %s\n", e.what());
        }
        lock.lock();
    }
}

}  // namespace tether
