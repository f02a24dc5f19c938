// A fixed team of helper threads that run the parts of one training step beside the calling
// thread: what a worker's layer blocks (train/layer_split.hpp) or minibatch slices
// (train/batch_split.hpp) run on.
//
// Why not an OpenMP team: between two steps the helpers wait while the caller runs what is serial
// (the loss check, a strategy's exchange with the center). OpenMP's threads spin through such waits
// and each thread owns a fixed part of the work, which is fastest on an idle machine and ruinous on
// a busy one: with two compiler jobs beside a 2-thread run, every step waited for a descheduled
// thread's part and the run slowed several times over (measured: experiments/README.md). Here a
// step is a list of tasks that any member claims, so work that a descheduled helper has not started
// is done by whoever is running (at worst the run goes at one thread's pace); and a waiting thread
// spins for a bounded time, long enough to catch the next step on an idle machine, then sleeps, so
// a busy machine wakes it promptly. Each member first claims the task of its own index: run after
// run, the same thread then does the same part of the work while that part's data is still in its
// core's cache (two cores writing interleaved ranges of the same arrays run Adam several times
// slower than each on its own range, as their prefetchers pull each other's lines).
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
    // Most tasks one run() takes: 4 per member (row slices use 2 per member).
    int max_tasks() const { return int(taken_.size()); }
    // Runs job(t) for t = 0 .. tasks - 1, each once, on whichever member claims it first (the
    // caller is member 0 and claims task 0 first, helper m task m), and returns when all are
    // done; then rethrows the first exception a task threw. Tasks must not depend on each other
    // or on the thread that runs them. One caller at a time; at most max_tasks() tasks.
    void run(int tasks, const std::function<void(int task)>& job);

private:
    void helper_loop(int member);
    void shut_down();
    // Claims and runs unclaimed tasks, its own first, until none is left.
    void work(int member);
    // Runs task `task` if this call is the one that claims it.
    void run_if_unclaimed(int task);

    std::vector<std::thread> helpers_;
    // One flag per task: run() clears those of its tasks after publishing job_ and tasks_, and
    // a task is claimed by the one exchange that sets it. Every other flag stays set, so a
    // helper still scanning a finished run claims nothing, and any claim that succeeds is of
    // the current run and sees its job_.
    std::vector<std::atomic<bool>> taken_;
    std::atomic<int> tasks_{0};
    // Counts runs: a member that finished its own task and looks for others stops when a new
    // run has begun, and starts that one with its own task.
    std::atomic<std::uint32_t> run_id_{0};
    const std::function<void(int)>* job_ = nullptr;
    WaitableCounter posted_;  // one more per run(): wakes the helpers
    WaitableCounter done_;    // tasks finished, counted up
    std::mutex failure_mutex_;
    std::exception_ptr failure_;
    std::atomic<bool> stopping_{false};
};

}  // namespace tether
