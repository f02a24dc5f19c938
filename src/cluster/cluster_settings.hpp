// A cluster's settings, resolved once: the strategy, the workers and servers, what crosses the
// wire, the timeouts and the heartbeat, security, and when a run counts as failed. Two ways in,
// one reader: a config file's "cluster", "security" and "strategy" blocks (config/config.cpp),
// and the embedding API's ServiceOptions (Python's keyword arguments arrive as ServiceOptions),
// which become those blocks and are read by the same code; so every default exists once
// (<tether/cluster_defaults.hpp>), and an error names the key as the user wrote it
// ("cluster.heartbeat_ms", "ServiceOptions.heartbeat_ms").
// Every entry point takes the center's, the workers' and the transport's options from here
// (cluster/cluster_options.cpp): nothing else copies a setting into them.
#pragma once

#include <nlohmann/json.hpp>

#include <tether/cluster_defaults.hpp>
#include <tether/curve_keys.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/agreed_settings.hpp"
#include "codec/codec.hpp"
#include "strategy/configured_strategy.hpp"
#include "util/json_reader.hpp"

namespace tether {

struct ServiceOptions;  // <tether/tether.hpp>
struct Launcher;        // <tether/tether.hpp>
struct CenterOptions;   // center/center.hpp
struct WorkerOptions;   // worker/worker_node.hpp
struct TransportOptions;
struct ServerLink;      // worker/server_sessions.hpp
class ServerGroup;      // center/server_group.hpp
class Transport;

// CURVE authentication and encryption (<tether/curve_keys.hpp>). Off when
// keys.center_public_key is empty. Runs tether starts itself get keys of their own when none
// are given (cluster/run_keys.hpp); `insecure` says the user wants none.
struct SecuritySettings {
    CurveKeys keys;
    // No keys on purpose: a center may bind beyond loopback without them (with a warning), no
    // keys are made for a local or launcher run, and any peer may ask for a snapshot.
    bool insecure = false;
    bool enabled() const { return !keys.center_public_key.empty(); }
};

struct ClusterSettings {
    std::shared_ptr<const ConfiguredStrategy> strategy;  // the "strategy" block
    std::string mode = cluster_defaults::mode;  // embedded | local
    std::int64_t workers = cluster_defaults::workers;
    // Under a launcher, rank 0 hosts the center and trains too: workers = the world size (less
    // one when false). cluster/launcher.hpp.
    bool center_trains = cluster_defaults::center_trains;
    std::string endpoint;             // "" = inproc:// (embedded) or tcp://127.0.0.1:* (local)
    double quorum = cluster_defaults::quorum;  // share of live workers that closes a round at its deadline
    std::int64_t round_timeout_ms = cluster_defaults::round_timeout_ms;
    // Silence after which a worker (or the center) counts as lost
    std::int64_t worker_timeout_ms = cluster_defaults::worker_timeout_ms;
    // A worker that lost its center keeps trying to reach it for this long in all (a center
    // restarted with --resume, a stall, a link down), and a center whose workers all went silent
    // waits as long for them to come back, before either gives up.
    std::int64_t center_restart_ms = cluster_defaults::center_restart_ms;
    // A worker with nothing else to send says it is alive this often
    std::int64_t heartbeat_ms = cluster_defaults::heartbeat_ms;
    // Center: waiting for all workers; worker: for welcome
    std::int64_t join_timeout_ms = cluster_defaults::join_timeout_ms;
    // Worker: waiting for a reply (a synchronous round)
    std::int64_t reply_timeout_ms = cluster_defaults::reply_timeout_ms;
    // Elements of one chunk, the largest payload of one message (4 MiB of float32)
    std::int64_t chunk_elements = cluster_defaults::chunk_elements;
    // Extra milliseconds worker k sleeps after each local step (entry k; missing entries 0):
    // simulated stragglers, to study strategies with workers of unequal speed.
    std::vector<std::int64_t> step_delay_ms;
    // A run in which more than this share of the workers failed (diverged, crashed, lost)
    // exits 1, as does a run in which no update reached x~.
    double max_failed_share = cluster_defaults::max_failed_share;
    // A run whose workers trained less than this share of the planned samples (cluster.workers x
    // shard x training.epochs) exits 1: a lost worker never replaced leaves its data untrained.
    double min_trained_share = cluster_defaults::min_trained_share;
    // Center checkpoint period; 0 = only at the end
    std::int64_t checkpoint_seconds = cluster_defaults::checkpoint_seconds;
    // Dean et al.'s warmstart: worker 0 trains alone until the center has counted this many
    // samples, then the others start from that x~ (center/center.hpp). 0: all start together.
    std::int64_t warmstart_samples = cluster_defaults::warmstart_samples;
    bool elastic = cluster_defaults::elastic;  // workers beyond cluster.workers may join mid-run
    std::int64_t max_peers = cluster_defaults::max_peers;  // identities each server keeps state for at once
    // Servers that split x~ into server ranges (protocol/server_ranges.hpp)
    std::int64_t servers = cluster_defaults::servers;
    // Where the servers run: "center" (one process, rank 0's under a launcher) or "ranks"
    // (server k on rank k, S = the world size: docs/architecture.md, "Servers on the ranks").
    std::string server_placement = cluster_defaults::server_placement;
    bool servers_on_ranks() const { return server_placement == "ranks"; }
    // What crosses the wire (codec/codec.hpp): exchanges (worker -> center) and replies
    // ("same": as codec); topk keeps this share of the elements.
    std::string codec = cluster_defaults::codec;
    std::string reply_codec = cluster_defaults::reply_codec;
    double topk_ratio = cluster_defaults::topk_ratio;
    SecuritySettings security;  // the "security" block
    std::string origin = "cluster";  // "ServiceOptions" when the embedding API gave them

    CodecOptions payload_codec() const { return {codec_kind(codec), topk_ratio}; }
    CodecOptions reply_codec_options() const { return {codec_kind(reply_codec == "same" ? codec : reply_codec), topk_ratio}; }
    // `name` (a key of the "cluster" block) as the user wrote it: "cluster.endpoint" or
    // "ServiceOptions.address".
    std::string key(const std::string& name) const;
    // `name` (a key of the "security" block) as the user wrote it: "security.insecure" or
    // "ServiceOptions.insecure".
    std::string security_key(const std::string& name) const;

    // Every rule of warmstart_samples, but one: a single server, and (`samples_per_worker` > 0,
    // where a run knows its data) no more than worker 0 trains in all, training.epochs x its
    // shard, or the others would never start. The one left is the center rule's: a synchronous
    // rule refuses a warmstart (center/center.cpp), and only the rule knows it is one.
    void check_warmstart(std::uint64_t samples_per_worker = 0) const;

    // Per server of x~: its range and the settings it agrees with its workers: these, the
    // `model` (with "parameters" set here) and, when not null, the `data` the workers train on
    // and the `training` keys both ends must share (a config file's learning rate, batch size and
    // epochs; the embedding API leaves training to its user). Throws ConfigError when there are
    // more servers than parameters.
    std::vector<ServerIdentity> server_identities(std::size_t num_parameters, nlohmann::json model = nlohmann::json::object(),
                                                  const nlohmann::json& data = nullptr,
                                                  const nlohmann::json& training = nullptr) const;

    // What one server is told; the caller adds what depends on its run (snapshots, the samples
    // a worker can have trained).
    CenterOptions center_options(const ServerIdentity& server) const;
    // What a worker is told; the caller adds the epochs it trains.
    WorkerOptions worker_options() const;
    // A server's endpoints: never waiting on a peer, a message cap of one chunk, queues per peer
    // of one vector (`vector_messages`: the chunks of the largest vector a server sends or
    // receives at once), the ZMTP heartbeat of heartbeat_ms and worker_timeout_ms, and CURVE
    // (the allowlist installed on `transport`) when security is on and `bind` leaves this
    // process. Without keys, a tcp:// address beyond loopback is refused (ConfigError) unless
    // security.insecure; loopback and ipc:// are allowed with a warning.
    TransportOptions center_transport(Transport& transport, const std::vector<std::string>& bind,
                                      std::size_t vector_messages = 1) const;
    // A worker's channel to the server at `address` (also server 0's to the others'), with its
    // CURVE keys when security is on and `address` is not inproc://.
    TransportOptions worker_transport(const std::string& address) const;

    // Where the servers bind: `endpoint` (one address per server, separated by ','), or
    // `fallback()` for each.
    std::vector<std::string> bind_addresses(const std::function<std::string()>& fallback) const;
    // Binds server identities[first + i] at bind[i] on `transport`, each a Center over its range
    // of x~ (`x`, the whole vector) with center_options() and what `adjust` adds. `inproc_alias`
    // (one server only): also bound there, for a worker in this process (TransportOptions).
    std::unique_ptr<ServerGroup> make_servers(Transport& transport, const std::vector<std::string>& bind, std::size_t first,
                                              const std::vector<ServerIdentity>& identities, const std::vector<float>& x,
                                              const std::function<void(CenterOptions&, std::size_t server)>& adjust = {},
                                              const std::string& inproc_alias = {}) const;
    // A worker's links to every server at `address` (all of them, server 0 first, separated by
    // ','; `what` names where the list came from in errors).
    std::vector<ServerLink> connect(Transport& transport, const std::string& address, const std::string& what,
                                    const std::string& identity, const std::vector<ServerIdentity>& identities) const;
};

// Reads the three blocks (each reader left finished) and checks them against each other. The
// context's workers are taken from the cluster block. Under a `launcher`, cluster.workers
// defaults to its world size (less rank 0 when it does not train) and must equal it if given.
ClusterSettings read_cluster_settings(JsonReader cluster, JsonReader security, JsonReader strategy,
                                      StrategyContext context, const Launcher* launcher = nullptr);

// The embedding API's options (a distributed strategy only) for x~ of `num_parameters`.
// `resolved_blocks`, when given, receives the "cluster", "security" and "strategy" blocks as
// resolved (every key with its value), as a config file's config.json holds them.
ClusterSettings cluster_settings(const ServiceOptions& options, std::size_t num_parameters,
                                 nlohmann::json* resolved_blocks = nullptr);

// `keys` as the entries of a "security" block (all but insecure).
nlohmann::json security_block(const CurveKeys& keys);

// "tcp://a:1,tcp://a:2" -> its addresses; throws ConfigError naming `what` for an empty entry.
std::vector<std::string> split_addresses(const std::string& list, const std::string& what);

}  // namespace tether
