// eval.every_seconds in a distributed run: a thread that, every period, asks for a snapshot of
// x~ to be evaluated, so the curve (and time to target read off it) is dense in time and not
// only at eval.per_epoch's multiples of samples. It asks only when `due` says so: the center
// run answers no before training starts and while a snapshot still waits to be scored, so the
// evaluator never has more than the latest x~ pending on its account and a slow evaluation
// costs points of the curve, never memory.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tether {

class SnapshotTimer {
public:
    // `due` and `take` run on the timer's thread.
    SnapshotTimer(double every_seconds, std::function<bool()> due, std::function<void()> take);
    ~SnapshotTimer();  // stops

    void start();
    // Returns once the thread has ended; no `take` runs after it.
    void stop();

private:
    void loop();

    double every_seconds_;
    std::function<bool()> due_;
    std::function<void()> take_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace tether
