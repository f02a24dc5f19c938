#include "worker/server_session.hpp"

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>


namespace tether {

namespace {
// The server answered "unknown worker" to an exchange: it restarted (or counted this worker
// lost); the worker joins again and goes on.
struct ServerForgotThisWorker {};
// A server k > 0 answered a hello `id taken`: a live worker there still holds the id server 0
// gave this one (server 0 counted that worker lost a moment before this server will).
struct IdTaken {
    std::string text;
};
}  // namespace

ServerSession::ServerSession(std::unique_ptr<Channel> channel, SessionOptions options, std::size_t num_parameters)
    : channel_(std::move(channel)), options_(std::move(options)), num_parameters_(num_parameters),
      exchanges_out_({num_parameters, options_.chunk_elements, options_.payload_codec, options_.wire_kinds.payload}),
      replies_in_({num_parameters, options_.chunk_elements, options_.reply_codec, options_.wire_kinds.reply}, "reply",
                  "cluster.reply_codec", /*refuse_non_finite=*/false),
      welcomes_in_({num_parameters, options_.chunk_elements}, "welcome", "", /*refuse_non_finite=*/false),
      buffers_out_({options_.buffer_count, options_.chunk_elements}),
      buffers_in_({options_.buffer_count, options_.chunk_elements}, "buffers", "", /*refuse_non_finite=*/false),
      outage_(options_.heartbeat_ms, options_.center_timeout_ms, options_.center_restart_ms) {}

std::chrono::milliseconds ServerSession::silence() const {
    if (!heard_from_server_) return std::chrono::milliseconds(0);
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_);
}

void ServerSession::heard() {
    heard_from_server_ = true;
    last_heard_ = Clock::now();
    outage_.heard();
}

ServerSession::~ServerSession() {
    if (!said_bye_ && channel_) channel_->abandon();
}

Header ServerSession::base_header(MessageType type) const {
    Header h;
    h.type = type;
    h.worker_id = worker_id_;
    h.fingerprint = options_.fingerprint;
    h.center_version = pull_version_;
    h.local_step = steps_;
    h.samples = samples_;
    h.sequence = sequence_;
    return h;
}

void ServerSession::send(const Header& header, const void* payload, std::size_t bytes) {
    const auto encoded = encode(header);
    try {
        channel_->send(encoded, payload, bytes);
    } catch (const DeliveryError& e) {
        throw DeliveryError("the server at " + address() + ": " + e.what());
    }
    bytes_sent_ += encoded.size() + bytes;
    last_send_ = Clock::now();
}

void ServerSession::send(const Header& header, const Payload& payload) {
    const auto encoded = encode(header);
    try {
        channel_->send(encoded, payload);
    } catch (const DeliveryError& e) {
        throw DeliveryError("the server at " + address() + ": " + e.what());
    }
    bytes_sent_ += encoded.size() + payload.size();
    last_send_ = Clock::now();
}

bool ServerSession::receive(Frames& frames, int timeout_ms) {
    if (!stash_.empty()) {
        frames = std::move(stash_.front());
        stash_.pop_front();
        return true;
    }
    return channel_->receive(frames, timeout_ms);
}

Header ServerSession::receive_vector(MessageType type, ChunkAssembler& in, Payload& out, int timeout_ms,
                                     std::uint64_t sequence) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    Frames frames;
    in.drop();  // what a wait given up on left
    auto last_note = Clock::now();
    bool held = false;  // the center said it holds this worker back (the warmstart)
    while (true) {
        if (closed_) throw SessionClosed{};
        // Rounded up: a deadline less than 1 ms away still waits, it does not spin. Waits are
        // sliced by the heartbeat: the worker says it is alive and learns whether the server is.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        const int slice = int(std::min<long long>(left, std::max(options_.heartbeat_ms, 10)));
        if (left <= 0 || !receive(frames, slice)) {
            const auto now = Clock::now();
            const auto silent = silence();
            const auto closed = channel_->closed_for();
            if ((outage_.lost(silent) || closed > kClosedLost) && options_.successor && !failed_over_ &&
                type != MessageType::welcome &&
                fail_over(outage_.lost(silent)
                              ? "has been silent for " + std::to_string(silent.count()) + " ms (cluster.worker_timeout_ms)"
                              : "closed its connection " + std::to_string(closed.count()) +
                                    " ms ago and is not listening again (its process ended)"))
                continue;
            if (outage_.give_up(silent))
                throw std::runtime_error("the server at " + address() + " has been silent for " +
                                         std::to_string(outage_.give_up_after().count()) +
                                         " ms (cluster.worker_timeout_ms, then cluster.center_restart_ms) while this worker "
                                         "waited for a " + to_string(type) + ": it is gone or stalled");
            if (outage_.note_due(silent))
                std::fprintf(stderr,
                             "worker %u: the server at %s has been silent for %lld ms (cluster.worker_timeout_ms %d); "
                             "waiting up to %lld ms in all (cluster.center_restart_ms) for it to come back "
                             "(tether server --resume)\n",
                             unsigned(worker_id_), address().c_str(), static_cast<long long>(silent.count()),
                             options_.center_timeout_ms, static_cast<long long>(outage_.give_up_after().count()));
            if (left > 0) {
                if (type == MessageType::welcome && now - last_note > std::chrono::seconds(5)) {
                    std::fprintf(stderr, "worker: still waiting for the server at %s to welcome us%s...\n",
                                 address().c_str(),
                                 held ? " (worker 0 trains alone first: cluster.warmstart_samples)" : "");
                    last_note = now;
                }
                heartbeat_locked();
                if (while_waiting) while_waiting();
                continue;
            }
            throw std::runtime_error(std::string("no ") + to_string(type) + " from the server at " +
                                     address() + " within " + std::to_string(timeout_ms) +
                                     " ms; is the server running (and all cluster.workers started)?");
        }
        heard();
        bytes_received_ += frames.header.size() + frames.payload.size();
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (!h) throw std::runtime_error(std::string("malformed message from the server: ") + to_string(reason));
        if (h->type == MessageType::error) {
            const std::string text(frames.payload.begin(), frames.payload.end());
            if (h->error_code == ErrorCode::unknown_worker) {
                if (type == MessageType::reply) throw ServerForgotThisWorker{};
                // Waiting for a welcome after joining again: answers to what was sent before the
                // hello, which all arrive before the welcome.
                if (type == MessageType::welcome && rejoining_) continue;
            }
            if (type == MessageType::welcome && h->error_code == ErrorCode::id_taken) throw IdTaken{text};
            throw std::runtime_error("the server rejected this worker: " + text);
        }
        if (kept_lease_answer(*h, frames)) continue;
        if (h->type == MessageType::heartbeat) {  // the server's answer: alive
            // Held back on purpose: the wait is as long as the warmstart, not the join timeout.
            if (type == MessageType::welcome && (h->flags & kFlagHeld)) {
                held = true;
                deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
            }
            continue;
        }
        if (h->type != type) throw std::runtime_error(std::string("expected ") + to_string(type) + " from the server, got " + to_string(h->type));
        if (h->fingerprint != options_.fingerprint) throw std::runtime_error("the server trains a different model or strategy (fingerprint mismatch)");
        if (type == MessageType::reply && h->sequence != sequence) throw std::runtime_error("reply to exchange " + std::to_string(h->sequence) + " while waiting for " + std::to_string(sequence));
        if (type == MessageType::token) {  // one message, not a vector: `in` has no part in it
            out = std::move(frames.payload);
            return *h;
        }
        switch (in.add(*h, frames.payload)) {
            case ChunkAssembler::Result::partial:
            case ChunkAssembler::Result::piece: continue;  // never: a worker's assemblers do not stream
            case ChunkAssembler::Result::complete: out = in.take(); return *h;
            case ChunkAssembler::Result::refused: {
                // A chunk that does not decode is malformed; one that breaks the layout, inconsistent.
                const Refusal& why = in.refusal();
                if (why.code == ErrorCode::bad_encoding)
                    throw std::runtime_error(std::string("malformed ") + to_string(type) + " from the server: " + why.detail);
                throw std::runtime_error(std::string("inconsistent ") + to_string(type) + " chunk from the server: " +
                                         to_string(why.code) + ": " + why.detail);
            }
        }
    }
}

Welcome ServerSession::join() {
    std::lock_guard<std::mutex> lock(mutex_);
    return join_locked();
}

Welcome ServerSession::join_locked() {
    Payload center;
    const Header h = hello_locked(center);
    Welcome welcome;
    welcome.center.assign(center.floats(), center.floats() + num_parameters_);
    welcome.worker_id = h.worker_id;
    welcome.version = h.center_version;
    welcome.trained = h.samples;
    if (options_.buffer_count > 0) {  // b~ follows the welcome
        Payload buffers;
        receive_vector(MessageType::buffers, buffers_in_, buffers, options_.join_timeout_ms, 0);
        welcome.buffers.assign(buffers.floats(), buffers.floats() + options_.buffer_count);
    }
    if (options_.token_follows_welcome) {
        Payload token;
        receive_vector(MessageType::token, welcomes_in_, token, options_.join_timeout_ms, 0);
        welcome.token.assign(reinterpret_cast<const char*>(token.data()), token.size());
    }
    worker_id_ = h.worker_id;
    pull_version_ = h.center_version;
    keep_pulled(welcome.center.data(), h.center_version);
    {
        std::lock_guard<std::mutex> asks(logs_mutex_);
        lease_out_ = false;  // a server that welcomed this worker again answers no ask made before
    }
    // Both ends of each compressed direction start again from this x~.
    exchanges_out_.reset(welcome.center.data());
    replies_in_.reset(welcome.center.data());
    return welcome;
}

Header ServerSession::hello_locked(Payload& center) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.join_timeout_ms);
    while (true) {
        Header hello = base_header(MessageType::hello);
        hello.element_count = num_parameters_;
        hello.dtype = Dtype::utf8;
        // To a server k > 0: server 0's token for the id asked for opens the payload.
        const std::string payload = token_ + options_.agreed_settings;
        if (!token_.empty()) hello.flags |= kFlagToken;
        send(hello, payload.data(), payload.size());
        said_hello_ = true;
        try {
            return receive_vector(MessageType::welcome, welcomes_in_, center, options_.join_timeout_ms, 0);
        } catch (const IdTaken& taken) {
            // The holder is gone once this server's own timeout passes; a live one keeps its id,
            // and this worker stops at the join timeout, naming why.
            if (Clock::now() >= deadline) throw std::runtime_error("the server rejected this worker: " + taken.text);
            for (int slice = 0; slice < 5; ++slice) {
                std::this_thread::sleep_for(std::chrono::milliseconds(std::max(options_.heartbeat_ms, 20)));
                if (while_waiting) while_waiting();
            }
        }
    }
}

void ServerSession::send_exchange(const Payload& payload, const WorkerProgress& at, const Payload* buffers) {
    std::lock_guard<std::mutex> lock(mutex_);
    flush_logs_locked();
    ++sequence_;
    Header h = base_header(MessageType::exchange);
    h.local_step = at.steps;  // the snapshot's, which an overlapped exchange's training thread has left behind
    h.samples = at.samples;
    if (options_.buffer_count > 0) {
        if (!buffers) throw std::logic_error("ServerSession::send_exchange: this server averages buffers; none given");
        Header b = h;
        b.type = MessageType::buffers;
        buffers_out_.send(b, *buffers, [&](const Header& chunk_header, const Payload& chunk) { send(chunk_header, chunk); });
    }
    exchanges_out_.send(h, payload, [&](const Header& chunk_header, const Payload& chunk) { send(chunk_header, chunk); });
}

ServerReply ServerSession::receive_reply() {
    std::lock_guard<std::mutex> lock(mutex_);
    ServerReply outcome;
    try {
        const Header h = receive_vector(MessageType::reply, replies_in_, outcome.reply, options_.reply_timeout_ms, sequence_);
        outcome.version = h.center_version;
        if ((h.flags & kFlagWindow) && h.local_step > 0 && h.local_step <= 1'000'000) outcome.window = int(h.local_step);
        outcome.budget_met = (h.flags & kFlagBudgetMet) != 0;
        pull_version_ = outcome.version;
        keep_pulled(outcome.reply.floats(), outcome.version);
    } catch (const ServerForgotThisWorker&) {
        std::fprintf(stderr, "worker %u: the server at %s does not know this worker any more (restarted?); joining again\n",
                     unsigned(worker_id_), address().c_str());
        const std::uint64_t pulled = pull_version_;
        rejoining_ = true;
        outcome.rejoined = join_locked();
        rejoining_ = false;
        ++rejoins_;
        // A server back at version 0 started from its initial x~, not from its checkpoint:
        // going on would throw away what the run trained, without a word.
        if (outcome.rejoined->version == 0 && pulled > 0)
            throw std::runtime_error("the server at " + address() + " came back at version 0, without the "
                                     "run's state (this worker had pulled version " + std::to_string(pulled) +
                                     "): it started again from its initial x~ (not resumed, or from nothing to resume). Start it with resume "
                                     "(tether server --resume RUN_DIR; Python: run_dir= and resume=True, which a "
                                     "launcher's restarted attempt sets by itself)");
    }
    return outcome;
}

std::string ServerSession::address() const {
    if (!failed_over_) return options_.server_address;
    return successor_ + " (which took over from the server at " + options_.server_address + ")";
}

void ServerSession::keep_pulled(const float* x, std::uint64_t version) {
    if (!options_.keep_pulled) return;
    pulled_.x.assign(x, x + num_parameters_);
    pulled_.version = version;
}

bool ServerSession::fail_over(const std::string& why) {
    if (!asked_successor_)
        std::fprintf(stderr, "worker %u: the server at %s %s; looking for its successor\n", unsigned(worker_id_),
                     options_.server_address.c_str(), why.c_str());
    asked_successor_ = true;
    Successor next = options_.successor(pulled_);
    if (!next.channel) return false;
    std::fprintf(stderr, "worker %u: failing over to %s at %s\n", unsigned(worker_id_), next.who.c_str(),
                 next.address.c_str());
    channel_->abandon();
    channel_ = std::move(next.channel);
    successor_ = next.who + " at " + next.address;
    failed_over_ = true;
    stash_.clear();
    heard();  // the successor's own silence counts from now
    last_send_ = Clock::time_point();  // the next slice heartbeats at once: its answer (unknown worker) has it join again
    return true;
}

void ServerSession::heartbeat_locked() {
    flush_logs_locked();
    if (Clock::now() - last_send_ < outage_.probe_interval(silence())) return;
    send(base_header(MessageType::heartbeat), nullptr, 0);
}

void ServerSession::heartbeat_if_idle() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    // Not before the hello: while server 0 holds this worker's welcome (it waits for every
    // worker), a heartbeat to server k > 0 would arrive before any hello there and be refused.
    if (!lock.owns_lock() || said_bye_ || !said_hello_) return;
    heartbeat_locked();
    // Read the answers now, or a long pause would pile one up per heartbeat. Anything else the
    // server said (an error) waits in the stash for the next exchange to meet it.
    Frames frames;
    while (channel_->receive(frames, 0)) {
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (h && h->type == MessageType::heartbeat) {
            heard();
            bytes_received_ += frames.header.size();
        } else if (h && kept_lease_answer(*h, frames)) {
            heard();
            bytes_received_ += frames.header.size() + frames.payload.size();
        } else {
            stash_.push_back(std::move(frames));
        }
    }
}

void ServerSession::bye() {
    std::lock_guard<std::mutex> lock(mutex_);
    {
        std::lock_guard<std::mutex> asks(logs_mutex_);
        lease_ask_.clear();  // a worker that leaves takes no more work
    }
    flush_logs_locked();  // what was logged before finish() arrives before the bye
    send(base_header(MessageType::bye), nullptr, 0);
    said_bye_ = true;
}

}  // namespace tether
