#include "worker/session_thread.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace tether {

SessionThread::SessionThread(ServerSessions& session, int heartbeat_ms)
    : session_(session), heartbeat_(std::max(heartbeat_ms, 0)), thread_([this] { run(); }) {}

SessionThread::~SessionThread() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    session_.close();
    changed_.notify_all();
    thread_.join();
}

void SessionThread::post(Payload payload, const WorkerProgress& at, std::optional<Payload> buffers,
                         std::optional<std::size_t> server) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (posted_) throw std::logic_error("SessionThread::post: an exchange is already posted");
    job_ = std::move(payload);
    job_buffers_ = std::move(buffers);
    job_server_ = server;
    job_progress_ = at;
    posted_ = true;
    changed_.notify_all();
}

ExchangeOutcome SessionThread::wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!posted_) throw std::logic_error("SessionThread::wait: no exchange posted");
    changed_.wait(lock, [&] { return outcome_.has_value() || failure_ != nullptr; });
    posted_ = false;
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    ExchangeOutcome outcome = std::move(*outcome_);
    outcome_.reset();
    return outcome;
}

void SessionThread::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
        if (job_) {
            Payload payload = std::move(*job_);
            std::optional<Payload> buffers = std::move(job_buffers_);
            const WorkerProgress at = job_progress_;
            const std::optional<std::size_t> server = job_server_;
            job_.reset();
            job_buffers_.reset();
            lock.unlock();
            std::optional<ExchangeOutcome> outcome;
            std::exception_ptr failure;
            try {
                const Payload* b = buffers ? &*buffers : nullptr;
                outcome = server ? session_.exchange_some({*server}, payload, at, b) : session_.exchange(payload, at, b);
            } catch (const SessionClosed&) {
                return;  // the worker is being destroyed: nobody waits for this exchange
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
            outcome_ = std::move(outcome);
            failure_ = failure;
            changed_.notify_all();
            continue;
        }
        const auto woken = [&] { return stop_ || job_.has_value(); };
        if (heartbeat_.count() == 0) {
            changed_.wait(lock, woken);
            continue;
        }
        // Half the interval: a heartbeat is due heartbeat_ms after the last message, and it
        // goes at most half an interval late.
        if (changed_.wait_for(lock, heartbeat_ / 2 + std::chrono::milliseconds(1), woken)) continue;
        lock.unlock();
        try {
            session_.heartbeat_if_idle();
        } catch (const std::exception&) {
            // The center is unreachable: the next exchange meets the same failure and reports
            // it where the training loop sees it.
        }
        lock.lock();
    }
}

}  // namespace tether
