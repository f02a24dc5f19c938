// What a center is told, grouped by the part each group concerns (center/membership.hpp,
// rounds.hpp, update_path.hpp, snapshot_schedule.hpp, run_end.hpp); the center itself reads the
// rest, and the parts of a group that it acts on for its part (the checks before a join, who
// may ask for x~, the final snapshot). center_settings.cpp fills them from the run's
// settings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <tether/cluster_options.hpp>
#include <tether/strategy.hpp>
#include "codec/codec.hpp"

namespace tether {

class ServerTokens;     // center/server_tokens.hpp
class ServerDirectory;  // center/server_directory.hpp

struct MembershipOptions {
    int expected_workers = int(ClusterOptions{}.workers);
    int worker_timeout_ms = int(ClusterOptions{}.worker_timeout_ms);
    int join_timeout_ms = int(ClusterOptions{}.join_timeout_ms);
    // What no peer may exceed: identities the center holds state for at once; the samples one
    // worker can have trained (its shard × epochs).
    std::size_t max_peers = std::size_t(ClusterOptions{}.max_peers);
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
    // This server hands out the data as leases to the workers that ask (center/leases.hpp), of
    // lease_positions positions in all (the budget, or the passes over the training set; 0: the
    // first worker's word, else unbounded). Server 0 only.
    bool leases = false;
    std::uint64_t lease_positions = 0;
    // Server k > 0 of several (cluster.servers): server 0 gives the worker ids, and a hello here
    // asks for the one it gave; it is taken when no live peer holds it (a hello never evicts a
    // worker) and, with `tokens`, only with server 0's token for it (center_tokens.cpp).
    bool ids_from_hello = false;
    // Dean et al.'s warmstart (cluster.warmstart_samples): once the run starts, worker 0 trains
    // alone; every other worker stays joining (its heartbeats answered with kFlagHeld) until
    // the center has counted this many samples, then is welcomed with the x~ of that moment.
    // 0: none. Asynchronous strategies only (a round would wait on the held workers).
    std::uint64_t warmstart_samples = std::uint64_t(ClusterOptions{}.warmstart_samples);
};

struct RoundOptions {
    double quorum = ClusterOptions{}.quorum;
    int round_timeout_ms = int(ClusterOptions{}.round_timeout_ms);
};

struct UpdateOptions {
    std::size_t chunk_elements = std::size_t(ClusterOptions{}.chunk_elements);  // protocol/framing.hpp
    // The codecs of exchanges (worker -> center) and replies (center -> worker), and what the
    // strategy's vectors are. A lossy codec costs up to two vectors per worker here (the
    // receiver's copy of a state, the residual of an update; codec/wire_vector.hpp), freed
    // when the worker leaves. Welcomes are always float32: both ends start from the same x~.
    CodecOptions payload_codec, reply_codec;
    WireKinds wire_kinds;
    // Strategy::dynamic_windows: each reply tells its worker the window its rate earns out of
    // `window`, the strategy's (center/window_sizing.hpp). Asynchronous rules only.
    bool dynamic_windows = false;
    int window = 0;
    // Apply (or add into the round) each float32 chunk of an exchange as it arrives, where the
    // rule takes ranges (CenterRuleBase::takes_ranges) and, for an asynchronous rule, replies
    // are float32 too: no copy of any worker's vector is kept (docs/architecture.md, "Memory").
    // Off: every exchange is assembled whole first (a chunk refused half-way then leaves x~
    // as it was).
    bool stream_exchanges = true;
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
    int center_restart_ms = int(ClusterOptions{}.center_restart_ms);
    // After the last worker left, stay until a `snapshot` request with kFlagFinal has been
    // answered (at most membership.join_timeout_ms): a lead server in another process assembles
    // the final x~ from every server range.
    bool await_final_snapshot = false;
    // cluster.budget_samples: once the workers have trained this many samples in all, every
    // reply says so (kFlagBudgetMet). 0: no budget.
    std::uint64_t budget_samples = 0;
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
    // Server 0 with a server on every rank (cluster.server_placement "ranks"): where the other
    // servers are, as their ranks tell it (`servers` requests); null elsewhere.
    std::shared_ptr<ServerDirectory> directory;
    std::string name = "center";  // in log lines ("server 2/4")
};

}  // namespace tether
