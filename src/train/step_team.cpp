#include "train/step_team.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TETHER_PAUSE() _mm_pause()
#else
#define TETHER_PAUSE() std::this_thread::yield()
#endif

namespace tether {
namespace {

using Clock = std::chrono::steady_clock;

// How long a waiting thread spins before it sleeps. Longer than the serial part of a step
// (the batch gather, tens of us for the default MLP), so that on an idle machine the helpers
// do not sleep between steps; short enough that on a busy one they soon give the core back.
constexpr auto kSpin = std::chrono::microseconds(300);

}  // namespace

void WaitableCounter::add(std::uint32_t delta) {
    value_.fetch_add(delta, std::memory_order_seq_cst);
    // Both this and a sleeper's registration are sequentially consistent: either the sleeper
    // registered first and is woken here, or it sees the new value before it sleeps.
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        changed_.notify_all();
    }
}

std::uint32_t WaitableCounter::wait_while_equal(std::uint32_t old) {
    const auto until = Clock::now() + kSpin;
    for (int i = 0;; ++i) {
        const std::uint32_t now = value_.load(std::memory_order_acquire);
        if (now != old) return now;
        TETHER_PAUSE();
        if ((i & 63) == 63 && Clock::now() > until) break;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    changed_.wait(lock, [&] { return value_.load(std::memory_order_seq_cst) != old; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return value_.load(std::memory_order_acquire);
}

StepTeam::StepTeam(int members, std::function<void()> on_start) : taken_(std::size_t(4 * std::max(1, members))) {
    for (auto& flag : taken_) flag.store(true, std::memory_order_relaxed);
    try {
        for (int m = 1; m < members; ++m)
            helpers_.emplace_back([this, on_start, m] {
                if (on_start) on_start();
                helper_loop(m);
            });
    } catch (...) {  // a thread that could not start: stop those that did, then report it
        shut_down();
        throw;
    }
}

StepTeam::~StepTeam() { shut_down(); }

void StepTeam::shut_down() {
    stopping_.store(true, std::memory_order_seq_cst);
    posted_.add(1);
    for (auto& t : helpers_) t.join();
    helpers_.clear();
}

void StepTeam::run_if_unclaimed(int task) {
    std::atomic<bool>& flag = taken_[std::size_t(task)];
    // A read first: most flags a member scans are taken, and writing them would pull their
    // line from the core that claimed them.
    if (flag.load(std::memory_order_relaxed) || flag.exchange(true, std::memory_order_acq_rel)) return;
    // Claimed: the flag was cleared after job_ was set, and the caller cannot leave run()
    // before this task is done, so job_ is this run's.
    try {
        (*job_)(task);
    } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        if (!failure_) failure_ = std::current_exception();
    }
    done_.add(1);
}

void StepTeam::work(int member) {
    // A count read from an older run only bounds the scan: flags past the current run's tasks
    // stay set.
    const std::uint32_t run = run_id_.load(std::memory_order_acquire);
    const int tasks = tasks_.load(std::memory_order_acquire);
    const auto same_run = [&] { return run_id_.load(std::memory_order_acquire) == run; };
    // Its own tasks first (member, member + members, ...), so each thread keeps its part.
    for (int t = member; t < tasks && same_run(); t += members()) run_if_unclaimed(t);
    for (int t = 0; t < tasks && same_run(); ++t) run_if_unclaimed(t);
}

void StepTeam::helper_loop(int member) {
    std::uint32_t seen = 0;
    for (;;) {
        seen = posted_.wait_while_equal(seen);
        if (stopping_.load(std::memory_order_seq_cst)) return;
        work(member);
    }
}

void StepTeam::run(int tasks, const std::function<void(int)>& job) {
    if (tasks <= 0) return;
    if (tasks > max_tasks())
        throw std::invalid_argument("StepTeam::run: " + std::to_string(tasks) + " tasks, at most " +
                                    std::to_string(max_tasks()));
    const std::uint32_t target = done_.load() + std::uint32_t(tasks);
    run_id_.fetch_add(1, std::memory_order_acq_rel);
    job_ = &job;
    tasks_.store(tasks, std::memory_order_seq_cst);
    for (int t = 0; t < tasks; ++t) taken_[std::size_t(t)].store(false, std::memory_order_release);
    if (!helpers_.empty()) posted_.add(1);
    work(0);
    for (std::uint32_t now = done_.load(); now != target;) now = done_.wait_while_equal(now);
    std::exception_ptr failure;
    {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace tether
