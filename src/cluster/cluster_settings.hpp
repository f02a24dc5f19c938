// A cluster's settings, resolved once: its options (<tether/cluster_options.hpp>), the strategy,
// security, and what only `tether run` reads. Two ways in, one check: a config file's
// "cluster", "security" and "strategy" blocks (config/config.cpp), read key by key from the
// option table, and the embedding API's ServiceOptions (Python's keyword arguments arrive as
// ServiceOptions), whose fields are the same options and are checked with the same limits; an
// error names the key as the user wrote it ("cluster.heartbeat_ms", "ServiceOptions.heartbeat_ms").
// The center's, the workers' and the transport's options are projections of these settings
// (center/center_settings.hpp, worker/worker_settings.hpp, center_transport/worker_transport
// below): nothing else copies a setting into them.
#pragma once

#include <nlohmann/json.hpp>

#include <tether/cluster_options.hpp>
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
struct TransportOptions;
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

struct ClusterSettings : ClusterOptions {
    std::shared_ptr<const ConfiguredStrategy> strategy;  // the "strategy" block
    // What only `tether run` and `tether worker` read: how the run's processes are started
    // (embedded | local), whether rank 0 trains under a launcher (cluster/launcher.hpp), the
    // extra milliseconds worker k sleeps after each local step (a simulated straggler; entry k,
    // missing entries 0), and the share of the planned samples (cluster.workers x shard x
    // training.epochs) below which a run fails (a lost worker never replaced leaves its data
    // untrained).
    std::string mode = "embedded";
    bool center_trains = kCenterTrainsByDefault;
    std::vector<std::int64_t> step_delay_ms;
    double min_trained_share = 0.9;
    SecuritySettings security;  // the "security" block
    std::string origin = "cluster";  // "ServiceOptions" when the embedding API gave them

    bool servers_on_ranks() const { return server_placement == "ranks"; }
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
    // The most bytes a server accepts in one message (its CenterOptions and its ZeroMQ maxmsgsize).
    std::size_t max_message_bytes() const;

    // Where the servers bind: `address` (one per server, separated by ','), or `fallback()` for each.
    std::vector<std::string> bind_addresses(const std::function<std::string()>& fallback) const;
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
