// tether's own thread of one worker. While the training loop is away (a validation pass, a
// checkpoint, a data loader stall) it keeps the worker alive: a heartbeat whenever the session
// has sent nothing for heartbeat_ms, and the center's answers read, so the center never counts
// a paused worker lost. With overlapped exchanges it also runs the exchange itself, on a
// payload the training thread made, while the training thread goes on with its next steps.
// It never touches the worker's parameters or its rule: those stay on the training thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "worker/server_sessions.hpp"

namespace tether {

class SessionThread {
public:
    // heartbeat_ms <= 0: no heartbeats from here (the training thread's own only).
    SessionThread(ServerSessions& session, int heartbeat_ms);
    // Interrupts a posted exchange that is still waiting, and joins.
    ~SessionThread();
    SessionThread(const SessionThread&) = delete;
    SessionThread& operator=(const SessionThread&) = delete;

    // Starts exchanging `payload`, made at `at` (with the model buffers taken then, if the run
    // has any), with every server, or with `server` alone (ServerSessions::exchange_some); at
    // most one exchange is posted at a time.
    void post(Payload payload, const WorkerProgress& at, std::optional<Payload> buffers = std::nullopt,
              std::optional<std::size_t> server = std::nullopt);
    bool posted() const { return posted_; }
    // Waits for the posted exchange; rethrows what it failed with.
    ExchangeOutcome wait();

private:
    void run();

    ServerSessions& session_;
    const std::chrono::milliseconds heartbeat_;
    std::mutex mutex_;
    std::condition_variable changed_;
    bool stop_ = false, posted_ = false;
    std::optional<Payload> job_, job_buffers_;
    std::optional<std::size_t> job_server_;
    WorkerProgress job_progress_;
    std::optional<ExchangeOutcome> outcome_;
    std::exception_ptr failure_;
    std::thread thread_;  // last: it starts once the fields above exist
};

}  // namespace tether
