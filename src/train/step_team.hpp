// A fixed team of helper threads that run the parts of one training step beside the calling
// thread: what a worker's minibatch slices (train/batch_split.hpp) run on.
//
// Why not an OpenMP team: between two steps the helpers wait ~100 us (the batch gather runs on
// the caller alone). OpenMP's threads spin through such waits and each thread owns a fixed
// part of the work, which is fastest on an idle machine and ruinous on a busy one: with two
// compiler jobs beside a 2-thread run, every step waited for a descheduled thread's part and
// the run fell to 9k samples/s. Here a step is a list of tasks that any member claims, so work
// that a descheduled helper has not started is done by whoever is running (at worst the run
// goes at one thread's pace); and a waiting thread spins for a bounded time, long enough to
// catch the next step on an idle machine, then sleeps, so a busy machine wakes it promptly.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tether {

// A counter threads wait on: spin for a while, then sleep until another thread changes it.
class WaitableCounter {
public:
    std::uint32_t load() const { return value_.load(std::memory_order_seq_cst); }
    // Adds `delta` and wakes the sleepers.
    void add(std::uint32_t delta);
    // Returns the value once it differs from `old`.
    std::uint32_t wait_while_equal(std::uint32_t old);

private:
    std::atomic<std::uint32_t> value_{0};
    std::atomic<int> sleepers_{0};
    std::mutex mutex_;
    std::condition_variable changed_;
};

class StepTeam {
public:
    // `members` threads in all: the caller and members - 1 helpers. `on_start` runs once on
    // each helper as it starts (e.g. to set its floating-point mode); it must not throw.
    StepTeam(int members, std::function<void()> on_start);
    ~StepTeam();
    StepTeam(const StepTeam&) = delete;
    StepTeam& operator=(const StepTeam&) = delete;

    int members() const { return int(helpers_.size()) + 1; }
    // Runs job(t) for t = 0 .. tasks - 1, each once, on whichever member claims it first (the
    // caller too), and returns when all are done; then rethrows the first exception a task
    // threw. Tasks must not depend on each other or on the thread that runs them. One caller
    // at a time.
    void run(int tasks, const std::function<void(int task)>& job);

private:
    void helper_loop();
    void shut_down();
    // Claims and runs tasks of the generation in claim_ until none is left.
    void work();

    std::vector<std::thread> helpers_;
    // The run in progress: generation in the high 32 bits, next unclaimed task in the low 32.
    // A claim is one compare-exchange on both, so a late helper can never take a task of a
    // newer run believing it belongs to the one it woke up for.
    std::atomic<std::uint64_t> claim_{0};
    std::atomic<int> tasks_{0};
    const std::function<void(int)>* job_ = nullptr;
    WaitableCounter posted_;  // one more per run(): wakes the helpers
    WaitableCounter done_;    // tasks finished, counted up
    std::mutex failure_mutex_;
    std::exception_ptr failure_;
    std::atomic<bool> stopping_{false};
};

}  // namespace tether
