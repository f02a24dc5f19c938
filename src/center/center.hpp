// One server of the center: owns its server range of x~ (all of x~ when cluster.servers is 1,
// the usual case, so the class keeps the role's name), its version and the strategy's
// CenterRule over that range, and serves workers through an Endpoint. Every message is
// validated (protocol/header.hpp, protocol/framing.hpp); a bad one is answered with an `error`,
// counted by reason, and leaves x~ untouched.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <tether/strategy.hpp>
#include "center/buffer_average.hpp"
#include "center/checkpoint_schedule.hpp"
#include "center/place_records.hpp"
#include "codec/codec.hpp"
#include "protocol/framing.hpp"
#include "protocol/header.hpp"
#include "transport/transport.hpp"

namespace tether {

class ServerTokens;  // center/server_tokens.hpp

// Each part of the center (center/membership.hpp, rounds.hpp, update_path.hpp,
// snapshot_schedule.hpp, run_end.hpp) reads its own group; the center itself reads the rest.
struct MembershipOptions {
    int expected_workers = 1;
    int worker_timeout_ms = 10000;
    int join_timeout_ms = 60000;
    // What no peer may exceed: identities the center holds state for at once; the samples one
    // worker can have trained (its shard × epochs).
    std::size_t max_peers = 256;
    std::uint64_t max_samples_per_worker = std::uint64_t(1) << 50;
    // The samples one window trains (communication window × batch size; 0: not known, as in
    // the embedding API). A worker's claim may run at most two windows ahead of what its last
    // accepted exchange said: heartbeats cannot move the count by more without exchanges, and
    // an overlapped worker's heartbeat may report the next window before this one's exchange.
    std::uint64_t max_samples_per_window = 0;
    // Workers beyond expected_workers may join a run in progress (a lost worker's place may
    // always be taken again).
    bool elastic = false;
    // Each place (worker id below expected_workers) holds one shard of the data, as tether's own
    // workers take them (id mod N): a joiner beyond them would train a live worker's shard again,
    // so it is welcomed as a place with everything trained, trains nothing, and any sample it
    // claims is implausible. An elastic
    // joiner is of use when a place is free: it takes over what that place has not trained.
    bool places_hold_shards = false;
    // Server k > 0 of several (cluster.servers): server 0 gives the worker ids, and a hello here
    // asks for the one it gave; it is taken when no live peer holds it (a hello never evicts a
    // worker) and, with `tokens`, only with server 0's token for it (center_tokens.cpp).
    bool ids_from_hello = false;
    // Dean et al.'s warmstart (cluster.warmstart_samples): once the run starts, worker 0 trains
    // alone; every other worker stays joining (its heartbeats answered with kFlagHeld) until
    // the center has counted this many samples, then is welcomed with the x~ of that moment.
    // 0: none. Asynchronous strategies only (a round would wait on the held workers).
    std::uint64_t warmstart_samples = 0;
};

struct RoundOptions {
    double quorum = 0.5;
    int round_timeout_ms = 30000;
};

struct UpdateOptions {
    std::size_t chunk_elements = 1 << 20;  // cluster.chunk_elements (protocol/framing.hpp)
    // The codecs of exchanges (worker -> center) and replies (center -> worker), and what the
    // strategy's vectors are. A lossy codec costs up to two vectors per worker here (the
    // receiver's copy of a state, the residual of an update; codec/wire_vector.hpp), freed
    // when the worker leaves. Welcomes are always float32: both ends start from the same x~.
    CodecOptions payload_codec, reply_codec;
    WireKinds wire_kinds;
};

struct SnapshotOptions {
    std::size_t samples_per_snapshot = 0;  // 0: no periodic snapshots
    // Whether a peer that is not a joined worker may ask for a snapshot of x~: with CURVE every
    // peer holds an allowed key (server 0 fetching another server's range holds one), and with
    // security.insecure the user accepted that anyone may. Otherwise only joined workers may.
    bool snapshots_for_any_peer = false;
    // on_checkpoint this often, the first time soon after the first update (center/checkpoint_schedule.hpp);
    // 0: only when serve() ends.
    int checkpoint_ms = 0;
    // Snapshot x~ once more when serve() ends (unless unchanged since the last one). Off where
    // the caller assembles the final x~ of several servers itself, once all are done.
    bool final_snapshot = true;
};

struct RunEndOptions {
    // When every worker went silent (none finished last), how long to wait for them to come back
    // before concluding (cluster.center_restart_ms).
    int center_restart_ms = 60000;
    // After the last worker left, stay until a `snapshot` request with kFlagFinal has been
    // answered (at most membership.join_timeout_ms): a lead server in another process assembles
    // the final x~ from every server range.
    bool await_final_snapshot = false;
};

struct CenterOptions {
    MembershipOptions membership;
    RoundOptions rounds;
    UpdateOptions updates;
    SnapshotOptions snapshots;
    RunEndOptions end;
    std::uint64_t fingerprint = 0;
    // What no peer may exceed: one message's bytes, all frames together.
    std::size_t max_message_bytes = std::size_t(64) << 20;
    // Given a hello's payload (the worker's agreed settings) whose fingerprint differs, names
    // the first setting that differs; unset: a generic message.
    std::function<std::string(const std::string& worker_settings)> explain_mismatch;
    // The agreed settings (JSON) told to whoever asks (a `settings` request): a worker that
    // was given no strategy takes the center's.
    std::string agreed_settings;
    // Server 0 of several: after each welcome it sends the worker its token for the others.
    bool issues_tokens = false;
    // The key the servers of the run share (center/server_tokens.hpp); null where they share
    // none (several processes without CURVE): then a server k > 0 checks no token.
    std::shared_ptr<const ServerTokens> tokens;
    std::string name = "center";  // in log lines ("server 2/4")
};

struct CenterStats {
    std::uint64_t updates_applied = 0;
    std::uint64_t exchanges = 0;
    std::uint64_t rounds = 0;
    std::uint64_t late_reports = 0;
    std::map<std::string, std::uint64_t> rejected;  // by reason
    int workers_joined = 0, workers_finished = 0, workers_lost = 0;
    // Peers that said hello but went silent before their welcome: never the run's workers, so
    // not lost workers either (a flood of them must not fail a healthy run).
    int peers_dropped = 0;
    // Lost workers whose place (worker id) a worker later took back (a restart, a rejoin after
    // an outage): the place's data was trained after all, so they fail nothing.
    int places_retaken = 0;
    // Workers welcomed but lost before their first accepted exchange: they moved nothing in x~,
    // as a flooder that took a place and went quiet does. Not in workers_lost; where the plan is
    // known, their untrained data shows in trained_share instead (record/run_verdict.hpp).
    int workers_silent = 0;
    std::uint64_t bytes_received = 0, bytes_sent = 0;
    double staleness_sum = 0;
    std::uint64_t staleness_count = 0;
    std::uint64_t staleness_max = 0;
    // Samples the workers trained: what their exchanges claimed, plus what live workers said
    // (heartbeats) they trained since their last exchange (dropped when they leave).
    std::uint64_t total_samples = 0;
    // Replies (rejections, heartbeat answers) dropped because the peer was not reading: the
    // center never waits on a peer.
    std::uint64_t replies_dropped = 0;

    std::uint64_t rejected_total() const;
    int live_workers() const { return workers_joined - workers_finished - workers_lost - peers_dropped - workers_silent; }
    nlohmann::json to_json() const;
};

// One completed exchange, for the per-exchange log.
struct ExchangeRecord {
    std::uint32_t worker_id;
    std::uint64_t sequence, version, staleness, bytes_received, bytes_sent;
    double update_norm;
};

// A worker's own scalars (protocol/worker_log.hpp), as the center received them.
struct LogRecord {
    std::uint32_t worker_id = 0;
    std::uint64_t worker_samples = 0;  // what the worker had trained when it logged them
    std::uint64_t total_samples = 0;   // what all workers had, as the center counts them then
    nlohmann::json scalars;            // names and numbers (null: not finite)
};

struct Snapshot {
    std::vector<float> x;
    std::uint64_t version = 0;
    CenterStats stats;
};

struct Checkpoint;  // center/checkpoint.hpp

class Center {
public:
    Center(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<CenterRule> rule, std::vector<float> initial,
           CenterOptions options);
    ~Center();

    std::string address() const { return endpoint_->address(); }
    // What makes server 0's word checkable by the other servers (null: nothing).
    const std::shared_ptr<const ServerTokens>& tokens() const { return options_.tokens; }
    // Serves until every worker that joined has finished or been lost, or stop() is called.
    // Throws when not all expected workers join within join_timeout_ms.
    void serve();
    void stop() { stop_requested_ = true; }
    // Goes on from a checkpoint (center/checkpoint.hpp): x~, its version and the counters. A
    // resumed center welcomes each worker as it (re)joins instead of waiting for all of them.
    void resume(const Checkpoint& checkpoint);
    // What resume() takes: x~, its version, the counters, and the fingerprint they belong to.
    Checkpoint checkpoint() const;
    // center_buffers.cpp. Holds the workers' model buffers and their average b~, starting from
    // b~(0) = `initial` (center/buffer_average.hpp): each worker sends its buffers before each
    // exchange and is sent b~ after its welcome. Only server 0 of several holds them; a center
    // that holds none refuses a `buffers` message. Call before resume() and serve().
    void hold_buffers(std::vector<float> initial);

    // Called on the center's thread with its state locked; keep them short (copy and hand
    // off), and do not call snapshot_now() or stats_now() from them.
    // on_start: when the expected workers have all joined and been welcomed (training starts).
    std::function<void()> on_start;
    std::function<void(Snapshot&&)> on_snapshot;
    std::function<void(const ExchangeRecord&)> on_exchange;
    // Soon after the first update, then every options.checkpoint_ms, and when serve() ends, with
    // checkpoint(); writes it somewhere safe.
    std::function<void(const Checkpoint&)> on_checkpoint;
    // center_log.cpp: a joined worker's scalars, checked; unset: they are dropped.
    std::function<void(const LogRecord&)> on_log;

    // Only once serve() has returned (or from the center's own thread).
    const CenterStats& stats() const { return stats_; }
    const CenterState& state() const { return state_; }
    // Safe from any thread while serve() runs: copies taken between two messages.
    CenterState snapshot_now() const;
    // As snapshot_now(), with b~ taken at the same instant into `buffers` (empty: none held).
    CenterState snapshot_now(std::vector<float>& buffers) const;
    CenterStats stats_now() const;
    // Safe from any thread, for progress displays: samples reported so far, and the version.
    std::uint64_t live_samples() const { return live_samples_.load(std::memory_order_relaxed); }
    std::uint64_t live_version() const { return live_version_.load(std::memory_order_relaxed); }

private:
    struct Worker;
    using Clock = std::chrono::steady_clock;

    void handle(const std::string& peer, Frames& frames);
    void handle_hello(const std::string& peer, const Header& h, const Frames& frames);
    void handle_exchange(Worker& w, const Header& h, const Frames& frames, std::uint64_t samples);
    // An exchange's first chunk must be newer than the last exchange accepted from this worker
    // and pulled from a version this center has had; its other chunks carry its sequence.
    // Returns false when it refused the chunk (counted).
    bool check_exchange_order(Worker& w, const Header& h);
    void complete_exchange(Worker& w);
    void reject(const std::string& peer, std::uint32_t worker_id, const std::string& reason, const std::string& detail);
    // Sends `data` (x~'s size) in chunks through `sender` (float32: without copying it); `h`
    // gives type, worker id and sequence. Throws DeliveryError.
    void send_chunks(const std::string& peer, Header h, const Payload& data, ChunkSender& sender);
    // send_chunks to a worker, whose place a failed delivery costs.
    void send_vector(Worker& w, MessageType type, const Payload& data, std::uint64_t sequence);
    // center_snapshots.cpp: a `snapshot` request, answered now or (kFlagFinal) when every
    // worker has finished.
    void answer_snapshot(const std::string& peer, const Header& request);
    void answer_final_snapshots();
    void release_pending(Worker& w);
    void welcome(Worker& w);
    // center_peers.cpp: welcome(w), unless the warmstart holds it back (w stays joining).
    void welcome_or_hold(Worker& w);
    // Whether worker 0 still trains alone: a warmstart not yet reached while worker 0 is live.
    bool warming_up() const;
    // When the warmstart is over (reached, or worker 0 gone): welcomes the workers it held, once.
    void release_held();
    // center_buffers.cpp: a worker's buffers in (chunks checked, its contribution replaced when
    // complete), and b~ out after a welcome.
    void handle_buffers(Worker& w, const Header& h, const Frames& frames);
    void send_buffers(Worker& w);
    // center_log.cpp: a worker's scalars, checked and handed to on_log.
    void handle_log(Worker& w, const Header& h, const Frames& frames);
    void maybe_close_round(bool deadline_passed);
    void check_liveness();
    // A hello that finds every place held: holders whose connection is closed (their process
    // ended; a restarted worker is a new peer) are lost now, not after worker_timeout_ms, so the
    // restarted worker takes its place back at once. A live connection keeps its place.
    void lose_disconnected();
    // Time this center itself did not read (stopped, swapped out, a long checkpoint write) is no
    // silence of its workers: what they sent meanwhile waits unread. Shifts their clocks by it.
    void forgive_own_stall(Clock::time_point now);
    // Whether the run may conclude with no live worker: not while every worker went silent less
    // than center_restart_ms ago (they may come back: a link down, a stall).
    bool may_conclude(Clock::time_point now) const;
    // Whether the workers of a resumed center have come back (or the join timeout passed).
    bool places_back(Clock::time_point join_deadline) const;
    void lose(Worker& w, const std::string& why);
    // Adds what a worker's accepted message says it trained since its last one, when the claim
    // is one it can have trained (max_samples_per_worker, max_samples_per_window); `exchange`:
    // the claim of a complete exchange, which the next claims are measured from.
    void count_samples(Worker& w, std::uint64_t samples, bool exchange = false);
    void maybe_snapshot(bool final);
    Worker* find(const std::string& peer);
    // center_tokens.cpp: server 0's word. Whether a hello to a server k > 0 may take the id it
    // asks for, and whether a request for the final x~ is server 0's (each refuses, counted,
    // when not); server 0's token to a worker after its welcome.
    bool admits_id(const std::string& peer, const Header& hello, const Frames& frames);
    bool admits_final_request(const std::string& peer, const Header& request, const Frames& frames);
    void send_token(Worker& w);
    // center_peers.cpp: who may join, who is alive, and the answers that keep workers' waits short.
    std::uint32_t free_worker_id(std::uint32_t preferred) const;
    void answer_heartbeat(Worker& w);
    void answer_settings(const std::string& peer, const Header& request);
    // `h` with `text` as its UTF-8 payload to `peer`; a failed delivery is counted, not retried.
    void send_text(const std::string& peer, Header h, const std::string& text);
    // Whether an "unknown worker" rejection is answered to `peer` now (one per 500 ms).
    bool first_unknown_answer(const std::string& peer);
    void forget(Worker& w);
    void prune_departed();

    std::unique_ptr<Endpoint> endpoint_;
    // Held by serve() while it handles a message (never while it waits for one), and by
    // snapshot_now() / stats_now(): readers see x~ and the counters between two updates.
    mutable std::mutex state_mutex_;
    std::unique_ptr<CenterRule> rule_;
    CenterOptions options_;
    ChunkSender float32_out_;  // welcomes and snapshots: always float32
    CenterState state_;
    BufferAverage buffers_;                    // b~; size 0: this center holds no buffers
    std::unique_ptr<ChunkSender> buffers_out_;  // b~ after each welcome, float32
    CenterStats stats_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::map<std::string, Worker*> by_peer_;
    std::vector<Worker*> round_;  // contributors of the open synchronous round
    Clock::time_point round_opened_;
    bool started_ = false, resumed_ = false;
    bool warmstart_over_ = false;  // the held workers were welcomed (MembershipOptions::warmstart_samples)
    std::map<std::string, Clock::time_point> unknown_answered_;  // peer -> last "unknown worker" answer
    CheckpointSchedule checkpoints_;
    PlaceRecords places_;  // what each worker id has trained, as counted
    Clock::time_point last_liveness_check_{};
    std::optional<Clock::time_point> all_silent_since_;  // the last live worker was lost (not finished)
    std::set<std::uint32_t> lost_places_;  // ids of lost workers no worker has taken back yet
    std::atomic<bool> stop_requested_{false};
    std::atomic<std::uint64_t> live_samples_{0}, live_version_{0};
    std::uint64_t next_snapshot_samples_ = 0;
    std::pair<std::uint64_t, std::uint64_t> last_snapshot_{~0ull, ~0ull};  // samples, version
    RecycledPayloads round_replies_;  // a synchronous round's one reply
    int rejections_logged_ = 0;
    std::vector<std::pair<std::string, Header>> final_requests_;  // peer, request
    bool final_answered_ = false;
};

}  // namespace tether
