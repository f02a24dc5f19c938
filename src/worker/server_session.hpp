// A worker's conversation with one server of the center over its one Channel: hello/welcome,
// exchanges (a vector out in chunks, a reply back), heartbeats, bye. It knows the protocol,
// not the strategy: payloads are host vectors made and applied by WorkerNode. A worker of S
// servers holds S of these (worker/server_sessions.hpp); with S = 1 the server is the center.
//
// Two threads use it: the training thread (join, blocking exchanges, bye) and the worker's own
// background thread (heartbeats while the training loop pauses, overlapped exchanges). A
// ZeroMQ socket is not thread-safe, so every use of the channel happens under one mutex: a
// socket may move between threads when a full memory barrier separates the uses, which the
// mutex gives. A second socket for heartbeats would not do: the center knows a worker by its
// socket's routing identity, and would not count the heartbeats of another identity.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tether/cluster_options.hpp>
#include <tether/lease.hpp>
#include <tether/strategy.hpp>

#include "codec/codec.hpp"
#include "protocol/framing.hpp"
#include "protocol/header.hpp"
#include "transport/transport.hpp"
#include "worker/center_outage.hpp"

namespace tether {

// What a session last pulled of its server's range: x~ there (as decoded) and its version.
struct PulledRange {
    std::vector<float> x;
    std::uint64_t version = 0;
};

// Where a lost server's work went: a channel to it, and who and where it is (for messages). No
// channel: not known yet, asked again at the next heartbeat slice of the wait.
struct Successor {
    std::unique_ptr<Channel> channel;
    std::string who, address;
};
// Given what the session last pulled (empty unless SessionOptions::keep_pulled). Called under
// the session's lock, once per heartbeat slice until it gives a channel: it must not block long.
using SuccessorSource = std::function<Successor(const PulledRange&)>;

struct SessionOptions {
    std::uint64_t fingerprint = 0;
    std::size_t chunk_elements = std::size_t(ClusterOptions{}.chunk_elements);  // protocol/framing.hpp
    int join_timeout_ms = int(ClusterOptions{}.join_timeout_ms);
    int reply_timeout_ms = int(ClusterOptions{}.reply_timeout_ms);
    int heartbeat_ms = int(ClusterOptions{}.heartbeat_ms);
    // Once the server has answered once, this much silence while waiting means it is gone.
    int center_timeout_ms = int(ClusterOptions{}.worker_timeout_ms);
    // ... and past it, how long in all the worker keeps waiting for the server to come back
    // (restarted with --resume, a stall, a link down) before it gives up (worker/center_outage.hpp).
    int center_restart_ms = int(ClusterOptions{}.center_restart_ms);
    std::string agreed_settings;  // sent in the hello, so the center can name a setting that differs
    std::string server_address;   // for messages only
    // The codecs of exchanges (worker -> center) and replies, and what the strategy's vectors
    // are (codec/wire_vector.hpp); the server uses the same, as the fingerprint makes sure.
    CodecOptions payload_codec, reply_codec;
    WireKinds wire_kinds;
    // The model buffers this server averages (src/center/center_buffers.cpp): server 0's count
    // in a run with buffers, else 0. They travel float32, whatever the codecs.
    std::size_t buffer_count = 0;
    // Server 0 of several: it sends a `token` after each welcome (and b~), which the worker shows
    // in its hellos to the other servers (center/server_tokens.hpp).
    bool token_follows_welcome = false;
    // Where this server's work goes once it is lost (silent for center_timeout_ms): a standby
    // center (tether::Standby), or with servers on the ranks the survivor that takes its range
    // over. None: the worker waits for this server to come back.
    SuccessorSource successor;
    // Keep what was last pulled of this server's range (PulledRange): a successor seeds from it.
    bool keep_pulled = false;
};

// What the center (or one server of it) told a worker on joining.
struct Welcome {
    std::uint32_t worker_id = 0;
    std::uint64_t version = 0;
    std::vector<float> center;  // x~ (of that server's range) at join time
    std::vector<float> buffers;  // b~, from a server that holds buffers (SessionOptions::buffer_count)
    // The samples the worker's place (its id, its shard) has trained so far, as the center counts
    // them: a worker that takes a place over trains the rest of it (WorkerNode::train).
    std::uint64_t trained = 0;
    std::string token;           // server 0's token for this worker's id (empty: none; SessionOptions::token_follows_welcome)
};

// One server's answer to one exchange: the reply vector and the version after it, or, when the
// server no longer knew this worker (it restarted, or counted the worker lost), the welcome of
// joining again.
struct ServerReply {
    Payload reply;
    std::uint64_t version = 0;
    int window = 0;  // dynamic local updates: the window the server gave (kFlagWindow); 0: none
    bool budget_met = false;  // the run's budget is trained (kFlagBudgetMet)
    std::optional<Welcome> rejoined;
};

// What every header says of the worker's work so far: local steps and samples. (The center
// version of its last pull the session keeps itself, from the welcome and each reply.)
struct WorkerProgress {
    std::uint64_t steps = 0, samples = 0;
};

// Server 0's answer to a lease ask (cluster.leases): the block, and whether the run's budget is
// trained (kFlagBudgetMet).
struct LeaseAnswer {
    Lease lease;
    bool budget_met = false;
};

// Thrown by a wait that close() interrupted.
struct SessionClosed {};

class ServerSession {
public:
    ServerSession(std::unique_ptr<Channel> channel, SessionOptions options, std::size_t num_parameters);
    // A session that did not say bye drops what it still had queued instead of lingering on it.
    ~ServerSession();

    // Says hello, asking for the worker id last held (set_worker_id), and waits for the welcome.
    Welcome join();
    // Sends `payload` (num_parameters floats) as the next exchange, made at `at`; a server that
    // holds buffers gets `buffers` (buffer_count floats) first, as its own message.
    void send_exchange(const Payload& payload, const WorkerProgress& at, const Payload* buffers = nullptr);
    // Waits for the reply to the exchange sent last; joins again when the server has forgotten
    // this worker. Throws on an error from the server, a timeout or a silent server.
    ServerReply receive_reply();
    ServerReply exchange(const Payload& payload, const WorkerProgress& at, const Payload* buffers = nullptr) {
        send_exchange(payload, at, buffers);
        return receive_reply();
    }
    // A heartbeat when nothing was sent for heartbeat_ms, unless another thread is using the
    // channel (it then heartbeats while it waits); reads the server's answers. Never blocks.
    void heartbeat_if_idle();
    void bye();
    // session_log.cpp: sends a log message (protocol/worker_log.hpp) now, or, while another
    // thread uses the channel (an overlapped exchange waiting for its reply), with that thread's
    // next heartbeat slice; it waits for the channel only when kMaxQueuedLogs are queued.
    // Throws std::logic_error after bye().
    void log(std::string scalars_json);
    static constexpr std::size_t kMaxQueuedLogs = 64;
    // session_lease.cpp: asks the server for the next block of the data (cluster.leases), of at
    // most `want` positions (`total`: the positions the worker's data give, 0: none named): now,
    // or, while another thread uses the channel, with its next heartbeat slice, as a log goes.
    // One ask at a time: another before its answer was taken does nothing.
    void ask_lease(std::uint64_t want, std::uint64_t total);
    // The answer to the ask (made now when none is out), waited for up to reply_timeout_ms
    // whoever holds the channel: the thread that reads it keeps what answers a lease.
    LeaseAnswer take_lease(std::uint64_t want, std::uint64_t total);
    // Makes every wait of another thread throw SessionClosed at its next heartbeat slice.
    void close() { closed_ = true; }

    // The progress heartbeats and the bye carry: set by the training thread, read by either.
    void set_progress(const WorkerProgress& p) { steps_ = p.steps, samples_ = p.samples; }
    std::uint32_t worker_id() const { return worker_id_; }
    // The id the next hello asks for (a follower server is told the one server 0 gave).
    void set_worker_id(std::uint32_t id) { worker_id_ = id; }
    // What the next hello shows a server k > 0: server 0's token for that id (Welcome::token).
    void set_token(std::string token) {
        std::lock_guard<std::mutex> lock(mutex_);
        token_ = std::move(token);
    }
    // The server's version at the last welcome or reply: sent with every exchange (staleness).
    std::uint64_t pull_version() const { return pull_version_; }
    // Called on every heartbeat slice of a wait, with this session's lock held: a worker of
    // several servers keeps the others alive while one answers slowly. It must not block.
    std::function<void()> while_waiting;
    std::uint64_t bytes_sent() const { return bytes_sent_; }
    std::uint64_t bytes_received() const { return bytes_received_; }
    std::size_t rejoins() const { return rejoins_; }
    // What was last pulled (SessionOptions::keep_pulled; empty otherwise), for after finish().
    PulledRange pulled() {
        std::lock_guard<std::mutex> lock(mutex_);
        return pulled_;
    }

private:
    using Clock = std::chrono::steady_clock;
    Welcome join_locked();
    // Says hello and receives the welcome's x~ into `center`; asks again while a server k > 0
    // answers `id taken`, until the join timeout.
    Header hello_locked(Payload& center);
    Header base_header(MessageType type) const;
    void send(const Header& header, const void* payload, std::size_t bytes);
    void send(const Header& header, const Payload& payload);  // without copying
    bool receive(Frames& frames, int timeout_ms);           // the stash first
    void heartbeat_locked();
    // The server's address for messages: the successor's, once failed over (any thread may ask).
    std::string address() const;
    // Swaps the channel for one to the successor (SessionOptions::successor), once it is known:
    // whether it is.
    // `why`: what made the server count as lost (its silence, or its closed connection).
    bool fail_over(const std::string& why);
    // A server whose connection its host closed this long ago, and which no one took up again
    // (ZeroMQ reconnects every 100-200 ms: a server restarted at once is back within that), is
    // a process gone: its successor is sought without waiting out worker_timeout_ms.
    static constexpr std::chrono::milliseconds kClosedLost{1000};
    void keep_pulled(const float* x, std::uint64_t version);
    void flush_logs_locked();  // session_log.cpp: the queued logs, in order, then a lease ask
    // Whether `frames` answer a lease ask: then kept for take_lease, and true.
    bool kept_lease_answer(const Header& h, const Frames& frames);
    // Receives a full vector (all its chunks) of `type` through `in` into `out`; returns the
    // last chunk's header.
    Header receive_vector(MessageType type, ChunkAssembler& in, Payload& out, int timeout_ms, std::uint64_t sequence);

    std::mutex mutex_;  // every use of channel_ and of the fields below it
    std::unique_ptr<Channel> channel_;
    SessionOptions options_;
    std::size_t num_parameters_;
    std::deque<Frames> stash_;  // what heartbeat_if_idle read that was not a heartbeat answer
    std::string token_;         // shown in each hello (set_token)
    // Exchanges out and replies in (through the codecs, restarted by every welcome); welcomes in
    // (always float32).
    ChunkSender exchanges_out_;
    ChunkAssembler replies_in_, welcomes_in_;
    ChunkSender buffers_out_;    // the worker's buffers, float32 (buffer_count > 0)
    ChunkAssembler buffers_in_;  // b~ after each welcome
    std::uint64_t sequence_ = 0;
    Clock::time_point last_send_;
    bool said_bye_ = false, rejoining_ = false;
    std::atomic<bool> failed_over_{false};  // talks to the successor now (SessionOptions::successor)
    std::string successor_;                 // who and where, for messages: written before failed_over_
    bool asked_successor_ = false;          // the loss was said, the successor asked for
    PulledRange pulled_;                    // SessionOptions::keep_pulled
    // Whether this session has said hello: until then its server does not know the worker, and
    // a heartbeat (another session's wait sends them) would be refused as an unknown worker.
    bool said_hello_ = false;
    bool heard_from_server_ = false;  // until then the join timeout bounds waits (startup races)
    Clock::time_point last_heard_;
    CenterOutage outage_;
    // The silence since the server was last heard from (0 before it ever was).
    std::chrono::milliseconds silence() const;
    void heard();

    std::mutex logs_mutex_;  // the queue and the lease ask alone: taken without the channel's mutex
    std::deque<std::string> logs_;
    std::string lease_ask_;  // to send (session_lease.cpp); empty: none queued
    bool lease_out_ = false;  // asked, its answer not yet taken
    std::optional<LeaseAnswer> lease_answer_;  // arrived, not yet taken

    std::atomic<bool> closed_{false};
    std::atomic<std::uint32_t> worker_id_{0};
    std::atomic<std::uint64_t> steps_{0}, samples_{0}, pull_version_{0};
    std::atomic<std::uint64_t> bytes_sent_{0}, bytes_received_{0};
    std::atomic<std::size_t> rejoins_{0};
};

}  // namespace tether
