// Server 0's evaluation of x~ during a distributed run: snapshots wait here and one thread
// scores them in order, so no server ever waits for an evaluation. At most one waits (two
// behind the first, x~ at t = 0, which is always scored): a newer snapshot replaces one not yet
// scored (counted in skipped()), so evaluations that cannot keep
// up with training cost points of the curve, never memory (one x~ waiting, one being scored). A snapshot holds x~ from
// every range served in this process; ranges served by other processes (`tether server
// --server K/S`) are fetched on this thread just before the snapshot is scored (within
// milliseconds of it being taken, unless evaluations lag), and with kFlagFinal for the final
// one, which waits until those servers' workers are done.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "center/center.hpp"
#include "center/remote_ranges.hpp"
#include "config/config.hpp"
#include "record/run_recorder.hpp"
#include "run/progress_printer.hpp"
#include "train/evaluator.hpp"

namespace tether {

struct PendingSnapshot {
    std::vector<float> x;       // x~'s full size; remote ranges filled in when it is scored
    std::uint64_t version = 0;  // server 0's
    std::vector<std::uint64_t> versions;  // of every server in this process
    CenterStats stats;          // of the servers in this process, combined
    double wall_seconds = 0;
    bool final = false;  // the last one: remote ranges are their servers' final ones
    bool record = true;  // false: only to be the final x~ (unchanged since the last one recorded)
};

class SnapshotEvaluator {
public:
    SnapshotEvaluator(const RunConfig& config, const TrainTestSplit& data, RunRecorder& recorder, ProgressPrinter& progress,
                      std::unique_ptr<RemoteRanges> remote);
    ~SnapshotEvaluator();

    // Snapshots pushed and not yet taken up for scoring (one being scored is not counted).
    std::size_t waiting() const;
    Backend& backend() { return *backend_; }
    void start();
    void push(PendingSnapshot snapshot);
    // Snapshots replaced by a newer one before they were scored.
    std::uint64_t skipped() const;
    // The ranges served elsewhere, as the last fetch left them (null: none).
    const RemoteRanges* remote() const { return remote_ && !remote_->empty() ? remote_.get() : nullptr; }
    // Waits until every snapshot pushed has been scored; returns the final x~ (the last
    // snapshot pushed, marked final). Rethrows a failure to fetch the final remote ranges.
    std::vector<float> finish();

private:
    void loop();
    void score(PendingSnapshot& s);

    const RunConfig& config_;
    TrainTestSplit data_;
    RunRecorder& recorder_;
    ProgressPrinter& progress_;
    std::unique_ptr<RemoteRanges> remote_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Evaluator> curve_, train_;
    CenterStats previous_;
    double previous_wall_ = 0;

    mutable std::mutex mutex_;
    std::uint64_t skipped_ = 0;
    std::uint64_t pushed_ = 0;
    bool first_waiting_ = false;  // the first snapshot is queued, not yet taken up
    std::condition_variable ready_;
    std::deque<PendingSnapshot> queue_;
    bool done_ = false;
    std::vector<float> final_x_;
    std::exception_ptr failure_;
    std::thread thread_;
};

}  // namespace tether
