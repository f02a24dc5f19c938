// A worker's asks for the next block of the data (cluster.leases; center/center_leases.cpp for
// the server's side). The training thread asks one step before it needs the block, so that the
// answer travels during that step; the channel may then be held by the worker's own thread (an
// overlapped exchange waiting for its reply), so the ask is queued as a log is, and whichever
// thread reads the channel keeps the answer for take_lease.
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <thread>

#include "worker/server_session.hpp"

namespace tether {

void ServerSession::ask_lease(std::uint64_t want, std::uint64_t total) {
    {
        std::lock_guard<std::mutex> lock(logs_mutex_);
        if (lease_out_) return;
        lease_out_ = true;
        lease_ask_ = nlohmann::json{{"want", want}, {"total", total}}.dump();
    }
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (lock.owns_lock() && !said_bye_) flush_logs_locked();
}

bool ServerSession::kept_lease_answer(const Header& h, const Frames& frames) {
    if (h.type != MessageType::lease) return false;
    const auto answer = nlohmann::json::parse(frames.payload.begin(), frames.payload.end(), nullptr, false);
    if (h.fingerprint != options_.fingerprint || !answer.is_object() || !answer.contains("start") ||
        !answer["start"].is_number_unsigned() || !answer.contains("count") || !answer["count"].is_number_unsigned())
        throw std::runtime_error("malformed lease from the server at " + address());
    std::lock_guard<std::mutex> lock(logs_mutex_);
    lease_answer_ = LeaseAnswer{{answer["start"].get<std::uint64_t>(), answer["count"].get<std::uint64_t>()},
                                (h.flags & kFlagBudgetMet) != 0};
    return true;
}

LeaseAnswer ServerSession::take_lease(std::uint64_t want, std::uint64_t total) {
    ask_lease(want, total);
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.reply_timeout_ms);
    while (true) {
        bool asked = true;
        {
            std::lock_guard<std::mutex> lock(logs_mutex_);
            if (lease_answer_) {
                const LeaseAnswer a = *lease_answer_;
                lease_answer_.reset();
                lease_out_ = false;
                return a;
            }
            asked = lease_out_;
        }
        if (!asked) ask_lease(want, total);  // the worker joined again meanwhile: ask its new server
        if (closed_) throw SessionClosed{};
        if (Clock::now() > deadline)
            throw std::runtime_error("no lease from the server at " + address() + " within " +
                                     std::to_string(options_.reply_timeout_ms) + " ms (cluster.reply_timeout_ms)");
        std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
        if (!lock.owns_lock()) {  // the worker's own thread reads the channel, and keeps the answer
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        flush_logs_locked();
        Frames frames;
        if (!channel_->receive(frames, std::max(1, std::min(options_.heartbeat_ms, 50)))) {
            heartbeat_locked();
            continue;
        }
        heard();
        bytes_received_ += frames.header.size() + frames.payload.size();
        ErrorCode reason = ErrorCode::none;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (!h) throw std::runtime_error(std::string("malformed message from the server: ") + to_string(reason));
        if (kept_lease_answer(*h, frames) || h->type == MessageType::heartbeat) continue;
        if (h->type == MessageType::error && (h->error_code == ErrorCode::malformed_lease || h->error_code == ErrorCode::unexpected_type))
            throw std::runtime_error("the server at " + address() + " refused a lease: " +
                                     std::string(frames.payload.begin(), frames.payload.end()));
        stash_.push_back(std::move(frames));  // an answer to something else: its own wait meets it
    }
}

}  // namespace tether
