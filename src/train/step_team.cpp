#include "train/step_team.hpp"

#include <chrono>
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

StepTeam::StepTeam(int members, std::function<void()> on_start) {
    try {
        for (int m = 1; m < members; ++m)
            helpers_.emplace_back([this, on_start] {
                if (on_start) on_start();
                helper_loop();
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

void StepTeam::work() {
    std::uint64_t word = claim_.load(std::memory_order_acquire);
    for (;;) {
        const auto task = std::uint32_t(word);
        if (task >= std::uint32_t(tasks_.load(std::memory_order_acquire))) return;
        if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel)) continue;
        // Claimed: the caller cannot leave run() before this task is done, so job_ is its.
        try {
            (*job_)(int(task));
        } catch (...) {
            std::lock_guard<std::mutex> lock(failure_mutex_);
            if (!failure_) failure_ = std::current_exception();
        }
        done_.add(1);
        word = claim_.load(std::memory_order_acquire);
    }
}

void StepTeam::helper_loop() {
    std::uint32_t seen = 0;
    for (;;) {
        seen = posted_.wait_while_equal(seen);
        if (stopping_.load(std::memory_order_seq_cst)) return;
        work();
    }
}

void StepTeam::run(int tasks, const std::function<void(int)>& job) {
    if (tasks <= 0) return;
    const std::uint32_t target = done_.load() + std::uint32_t(tasks);
    const std::uint64_t generation = (claim_.load(std::memory_order_relaxed) >> 32) + 1;
    // The count first: a helper holding a claim word of this generation reads it after.
    tasks_.store(0, std::memory_order_seq_cst);
    job_ = &job;
    claim_.store(generation << 32, std::memory_order_seq_cst);
    tasks_.store(tasks, std::memory_order_seq_cst);
    if (!helpers_.empty()) posted_.add(1);
    work();
    for (std::uint32_t now = done_.load(); now != target;) now = done_.wait_while_equal(now);
    std::exception_ptr failure;
    {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace tether
