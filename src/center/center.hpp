// One server of the center: owns its server range of x~ (all of x~ when cluster.servers is 1,
// the usual case, so the class keeps the role's name), its version and the strategy's
// CenterRule over that range, and serves workers through an Endpoint. Every message is
// validated (protocol/header.hpp, protocol/framing.hpp); a bad one is answered with an `error`,
// counted by reason, and leaves x~ untouched.
//
// The center is made of parts, each deciding one thing and sending nothing: Membership (who is in
// the run), Rounds (when a synchronous round closes), UpdatePath (x~, its version and the rule),
// SnapshotSchedule (when x~ is handed out) and RunEnd (when the run is over). The center checks
// and dispatches each message to them, ticks them between messages, and does every send.
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
#include "center/center_options.hpp"
#include "center/center_stats.hpp"
#include "center/ended_processes.hpp"
#include "center/membership.hpp"
#include "center/refusals.hpp"
#include "center/rounds.hpp"
#include "center/run_end.hpp"
#include "center/snapshot_schedule.hpp"
#include "center/update_path.hpp"
#include "protocol/framing.hpp"
#include "protocol/header.hpp"
#include "transport/transport.hpp"

namespace tether {

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
    // Safe from any thread: the process behind every worker whose peer identity starts with
    // `peer_prefix` has ended (its parent reaped it; transport/peer_identity.hpp): they are
    // lost at the next tick, for `why`, instead of after cluster.worker_timeout_ms of silence.
    void lose_process(const std::string& peer_prefix, const std::string& why) { ended_.add(peer_prefix, why); }
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
    // Soon after the first update, then every options.snapshots.checkpoint_ms, and when serve() ends, with
    // checkpoint(); writes it somewhere safe.
    std::function<void(const Checkpoint&)> on_checkpoint;
    // center_log.cpp: a joined worker's scalars, checked; unset: they are dropped.
    std::function<void(const LogRecord&)> on_log;

    // Only once serve() has returned (or from the center's own thread).
    const CenterStats& stats() const { return stats_; }
    const CenterState& state() const { return updates_.state(); }
    // Safe from any thread while serve() runs: copies taken between two messages; with
    // `buffers`, b~ taken at the same instant into it (empty: none held).
    CenterState snapshot_now(std::vector<float>* buffers = nullptr) const;
    CenterStats stats_now() const;
    // Once serve() has returned: why server 0 may lack this server's final range, "" if it has
    // it or never needed it (center/run_end.hpp).
    const std::string& final_missing() const { return end_.final_missing(); }
    // Safe from any thread, for progress displays: samples reported so far, and the version.
    std::uint64_t live_samples() const { return live_samples_.load(std::memory_order_relaxed); }
    std::uint64_t live_version() const { return live_version_.load(std::memory_order_relaxed); }

private:
    using Worker = CenterWorker;
    using Clock = CenterWorker::Clock;

    // Between two messages: the parts' deadlines, liveness, the warmstart, rounds, the end of the
    // run and checkpoints. Returns whether serve() leaves.
    bool tick();
    // One message from `peer`: checked, then dispatched by type, first what any peer may send,
    // then what only a welcomed worker sends.
    void handle(const std::string& peer, Frames& frames);
    // The header of a message no peer may send as it is (too large, malformed, another run's
    // fingerprint, extra frames) is refused, counted: nothing.
    std::optional<Header> checked_header(const std::string& peer, const Worker* w, const Frames& frames);
    void handle_hello(const std::string& peer, const Header& h, const Frames& frames);
    void handle_exchange(Worker& w, const Header& h, const Frames& frames);
    // One range of a streamed exchange (`streamed`: its reply goes out in the same frame), or a
    // whole one (its reply through the reply codec): applied, or added to the open round; the
    // exchange counts at its last range.
    void apply_exchange(Worker& w, const Header& h, const ChunkPiece& piece, std::uint64_t samples, bool streamed);
    void send_reply_piece(Worker& w, const Header& exchange, const ChunkPiece& piece, std::optional<int> window);
    // Counts the refusal by kind, drops the sender's partial vectors and answers an `error`
    // whose text is the kind's reason and `detail`.
    void reject(const std::string& peer, std::uint32_t worker_id, ErrorCode why, const std::string& detail);
    // Sends `data` (x~'s size) in chunks through `sender` (float32: without copying it); `h`
    // gives type, worker id and sequence. Throws DeliveryError.
    void send_chunks(const std::string& peer, Header h, const Payload& data, ChunkSender& sender);
    // send_chunks to a worker, whose place a failed delivery costs.
    // `window`: dynamic local updates, the worker's next window (kFlagWindow).
    void send_vector(Worker& w, MessageType type, const Payload& data, std::uint64_t sequence,
                     std::optional<int> window = std::nullopt);
    // center_snapshots.cpp: a `snapshot` request from whom the run trusts with x~, answered now
    // or (kFlagFinal, server 0's) when every worker has finished.
    void handle_snapshot(const std::string& peer, const Worker* w, const Header& request, const Frames& frames);
    void answer_snapshot(const std::string& peer, const Header& request);
    void answer_final_snapshots();
    void welcome(Worker& w);
    // center_peers.cpp: welcome(w), unless the warmstart holds it back (w stays joining).
    void welcome_or_hold(Worker& w);
    // center_buffers.cpp: a worker's buffers in (chunks checked, its contribution replaced when
    // complete), and b~ out after a welcome.
    void handle_buffers(Worker& w, const Header& h, const Frames& frames);
    void send_buffers(Worker& w);
    // center_log.cpp: a worker's scalars, checked and handed to on_log.
    void handle_log(Worker& w, const Header& h, const Frames& frames);
    void handle_lease(Worker& w, const Header& h, const Frames& frames);  // center_leases.cpp
    // Closes the open round when Rounds says it may: x~ updated, one reply to every contributor.
    void maybe_close_round(bool deadline_passed);
    void check_liveness(Clock::time_point now);
    // A hello that finds every place held: holders whose connection is closed (their process
    // ended; a restarted worker is a new peer) are lost now, not after worker_timeout_ms, so the
    // restarted worker takes its place back at once. A live connection keeps its place.
    // `waited_on_only`: only the workers an open round waits on (probe_round).
    void lose_disconnected(bool waited_on_only = false);
    // A synchronous round open for a while: the members it waits on whose connection closed
    // (a killed process) are lost now, not after worker_timeout_ms (lose_disconnected), asked
    // every kRoundProbeMs.
    void probe_round(Clock::time_point now);
    static constexpr int kRoundProbeMs = 250;
    Clock::time_point round_probed_;
    void lose(Worker& w, const std::string& why);
    void maybe_snapshot(bool final);
    // The workers have trained the run's budget (cluster.budget_samples) between them. Once
    // met it stays met: the count falls when a worker leaves, but the workers told stay stopped.
    bool budget_met() {
        budget_met_ = budget_met_ || (options_.end.budget_samples > 0 && stats_.total_samples >= options_.end.budget_samples);
        return budget_met_;
    }
    // center_tokens.cpp: server 0's word. Whether a hello to a server k > 0 may take the id it
    // asks for, and whether a request for the final x~ is server 0's (each refuses, counted,
    // when not); server 0's token to a worker after its welcome.
    bool admits_id(const std::string& peer, const Header& hello, const Frames& frames);
    bool admits_final_request(const std::string& peer, const Header& request, const Frames& frames);
    void send_token(Worker& w);
    // center_peers.cpp: the answers that keep workers' waits short.
    void answer_heartbeat(Worker& w);
    void answer_settings(const std::string& peer, const Header& request);
    void answer_directory(const std::string& peer, const Header& request, const Frames& frames);
    // `h` with `text` as its UTF-8 payload to `peer`; a failed delivery is counted, not retried.
    void send_text(const std::string& peer, Header h, const std::string& text);

    std::unique_ptr<Endpoint> endpoint_;
    // Held by serve() while it handles a message (never while it waits for one), and by
    // snapshot_now() / stats_now(): readers see x~ and the counters between two updates.
    mutable std::mutex state_mutex_;
    CenterOptions options_;
    CenterStats stats_;  // each part counts its own; declared before them
    UpdatePath updates_;
    Membership membership_;
    Rounds rounds_;
    SnapshotSchedule snapshots_;
    RunEnd end_;
    ChunkSender float32_out_;  // welcomes and snapshots: always float32
    BufferAverage buffers_;                    // b~; size 0: this center holds no buffers
    std::unique_ptr<ChunkSender> buffers_out_;  // b~ after each welcome, float32
    Refusals refusals_;
    std::atomic<bool> stop_requested_{false};
    std::set<std::uint32_t> rejoined_;  // worker ids heard since a resume (CenterStats::rolled_back_updates)
    EndedProcesses ended_;  // lose_process() from any thread; tick() takes them
    std::atomic<std::uint64_t> live_samples_{0}, live_version_{0};
    bool budget_met_ = false;  // budget_met()
};

}  // namespace tether
