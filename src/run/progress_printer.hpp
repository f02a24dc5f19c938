// A run's progress on standard output. Every evaluation prints one line. Between evaluations, a
// terminal gets one live status line (epoch, test accuracy, samples/s, center version,
// elapsed, ETA) redrawn twice a second; output that is not a terminal (a log file, CI) gets
// the same status as a plain line every 30 s instead, so long epochs never look hung.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "record/run_recorder.hpp"

namespace tether {

struct LiveStatus {
    std::uint64_t samples = 0;  // training samples so far, all workers
    std::uint64_t version = 0;  // center version (0 without a center)
};

class ProgressPrinter {
public:
    // `samples_per_epoch`: training samples in one pass (all workers together); `curve_set`:
    // which samples the accuracy is measured on ("validation" or "test").
    ProgressPrinter(std::string label, double total_epochs, std::size_t samples_per_epoch, const std::string& curve_set);
    ~ProgressPrinter();

    // Starts the status updates; `poll` is called from the progress thread and must be
    // thread-safe (read atomics).
    void start(std::function<LiveStatus()> poll);
    void stop();
    void report(const EvaluationPoint& point, double samples_per_second);

private:
    void loop();
    std::string status_line(const LiveStatus& s, double elapsed) const;

    std::string label_;
    std::string accuracy_label_;  // "val acc" or "test acc"
    double total_epochs_;
    std::size_t samples_per_epoch_;
    bool terminal_;
    std::function<LiveStatus()> poll_;
    std::chrono::steady_clock::time_point started_, last_line_;
    double last_accuracy_ = -1;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false, status_shown_ = false;
    std::thread thread_;
};

}  // namespace tether
