// A worker's own scalars on their way to server 0 (protocol/worker_log.hpp). The training
// thread logs between steps; the channel may then be in use by the worker's own thread (an
// overlapped exchange waits for its reply holding it), so a log is queued and goes out with
// the next message this session sends, or its next heartbeat slice: within heartbeat_ms.
#include <stdexcept>

#include "worker/server_session.hpp"

namespace tether {

void ServerSession::log(std::string scalars_json) {
    std::size_t queued = 0;
    {
        std::lock_guard<std::mutex> lock(logs_mutex_);
        logs_.push_back(std::move(scalars_json));
        queued = logs_.size();
    }
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
        if (queued < kMaxQueuedLogs) return;
        lock.lock();  // a worker logging faster than the channel frees up waits, as back-pressure
    }
    if (said_bye_) {
        std::lock_guard<std::mutex> logs(logs_mutex_);
        logs_.clear();
        throw std::logic_error("log() after finish(): this worker has left the center");
    }
    flush_logs_locked();
}

void ServerSession::flush_logs_locked() {
    std::deque<std::string> out;
    std::string ask;
    {
        std::lock_guard<std::mutex> lock(logs_mutex_);
        out.swap(logs_);
        ask.swap(lease_ask_);
    }
    for (const std::string& text : out) {
        Header h = base_header(MessageType::log);
        h.dtype = Dtype::utf8;
        h.element_count = text.size();
        send(h, text.data(), text.size());
    }
    if (!ask.empty()) {
        Header h = base_header(MessageType::lease);
        h.dtype = Dtype::utf8;
        h.element_count = ask.size();
        send(h, ask.data(), ask.size());
    }
}

}  // namespace tether
