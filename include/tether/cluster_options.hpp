// A cluster's options: the keys of a config file's "cluster" block that every entry point
// honours, each a typed field with its default, written here once. A config file fills them
// (through the "cluster" block), `--set` (the same block), the embedding API (ServiceOptions
// is one, <tether/tether.hpp>) and Python's keyword arguments (generated from
// for_each_cluster_option); what each means is docs/config.md's.
//
// for_each_cluster_option is the one list of them: the config reader and `tether config-keys`
// read and document each key from it, the embedding API checks its fields with the same limits
// and the same errors, a run directory's config.json writes them from it, and Python takes its
// keyword names from it. A key that only `tether run` reads (how it starts its processes and
// judges its run: cluster.mode, center_trains, step_delay_ms, min_trained_share) is not here.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace tether {

// Under a launcher, rank 0 hosts the center and trains too unless cluster.center_trains (or
// Python's Worker.from_env(center_trains=...)) says otherwise.
inline constexpr bool kCenterTrainsByDefault = true;

// What a key's value may be: an integer or number in a range, a string among `words` (any
// string when empty).
struct OptionLimits {
    std::int64_t min_integer = 0, max_integer = std::numeric_limits<std::int32_t>::max();
    double min = 0, max = 0;
    bool min_exclusive = false;  // min < value, not min <= value
    std::vector<std::string> words;
};

inline OptionLimits integers(std::int64_t min, std::int64_t max) { return {min, max, 0, 0, false, {}}; }
// [min, max], or (min, max] when `min_exclusive`.
inline OptionLimits numbers(double min, double max, bool min_exclusive = false) { return {0, 0, min, max, min_exclusive, {}}; }
inline OptionLimits one_of(std::vector<std::string> words) { return {0, 0, 0, 0, false, std::move(words)}; }
inline OptionLimits any_text() { return {}; }
inline OptionLimits true_or_false() { return {}; }

// A key and, where the embedding API names its field otherwise, the field's name.
struct OptionName {
    const char* key;
    const char* field = nullptr;
    OptionName(const char* k, const char* f = nullptr) : key(k), field(f) {}
    const char* field_name() const { return field ? field : key; }
};

struct ClusterOptions {
    // Workers in the run (a launcher's world size by default). 0 in a WorkerClient::connect:
    // the center's.
    std::int64_t workers = 1;
    // Where the center listens (cluster.endpoint): "" = tether's choice (inproc:// in one
    // process, tcp://127.0.0.1:* for a local run); one address per server, separated by ','.
    std::string address;
    double quorum = 0.5;  // share of live workers that closes a synchronous round at its deadline
    std::int64_t round_timeout_ms = 30000;
    // Silence after which a worker (or, to a worker, the center) counts as lost
    std::int64_t worker_timeout_ms = 10000;
    // A worker that lost its center keeps trying to reach it for this long in all (a center
    // restarted with --resume, a stall, a link down), and a center whose workers all went silent
    // waits as long for them to come back, before either gives up.
    std::int64_t center_restart_ms = 60000;
    // A worker with nothing else to send says it is alive this often: at most half of
    // worker_timeout_ms.
    std::int64_t heartbeat_ms = 2000;
    std::int64_t join_timeout_ms = 60000;   // center: for all workers to join; worker: for its welcome
    std::int64_t reply_timeout_ms = 600000;  // worker: for a reply (a synchronous round)
    std::int64_t chunk_elements = 1 << 20;  // elements of one message's payload (4 MiB of float32)
    // A run in which more than this share of the workers failed (diverged, crashed, lost)
    // fails, as does a run in which no update reached x~.
    double max_failed_share = 0.5;
    std::int64_t checkpoint_seconds = 60;  // the center's checkpoint period; 0: only at the end
    // Dean et al.'s warmstart: worker 0 trains alone until the center has counted this many
    // samples, then the others start from that x~. 0: all start together. Asynchronous only.
    std::int64_t warmstart_samples = 0;
    // The run's length: samples all workers train together, counted by the center, which tells
    // each worker in its next reply once they are trained; a worker then stops (the CLI's, and
    // an embedding or Python loop on WorkerClient::running()). Fast workers take more of it
    // than slow ones. 0: none (each worker trains its own share).
    std::int64_t budget_samples = 0;
    // Work that is leased, not owned: each worker asks server 0 for its next block of the data
    // (one window's samples of one shuffled stream over the training set) instead of training a
    // fixed shard, so a fast worker trains more of it, a joiner takes work at once and a lost
    // worker's untrained block is trained by another. The run ends when the budget, or without
    // one training.epochs passes, are handed out and trained.
    bool leases = false;
    bool elastic = false;      // workers beyond `workers` may join mid-run
    std::int64_t max_peers = 256;  // identities each server keeps state for at once
    std::int64_t servers = 1;  // servers that split x~ into server ranges
    // Where the servers run: "center" (one process) or "ranks" (server k on rank k: servers =
    // the ranks; docs/architecture.md, "Servers on the ranks").
    std::string server_placement = "center";
    // What crosses the wire: exchanges (worker -> center) and replies ("same": as codec); topk
    // keeps topk_ratio of the elements.
    std::string codec = "float32";
    std::string reply_codec = "same";
    double topk_ratio = 0.01;
};

// visit(name, field, limits) for each field of `options` (a ClusterOptions, const or not).
template <typename Options, typename Visit>
void for_each_cluster_option(Options& o, Visit&& visit) {
    const std::vector<std::string> codecs = {"float32", "fp16", "bf16", "int8", "int4", "topk"};
    std::vector<std::string> reply_codecs = codecs;
    reply_codecs.insert(reply_codecs.begin(), "same");
    constexpr std::int64_t day_ms = 86'400'000;
    visit(OptionName("workers"), o.workers, integers(1, 1024));
    visit(OptionName("endpoint", "address"), o.address, any_text());
    visit(OptionName("quorum"), o.quorum, numbers(0.0, 1.0, true));
    visit(OptionName("round_timeout_ms"), o.round_timeout_ms, integers(1, day_ms));
    visit(OptionName("worker_timeout_ms"), o.worker_timeout_ms, integers(100, day_ms));
    visit(OptionName("center_restart_ms"), o.center_restart_ms, integers(0, day_ms));
    visit(OptionName("heartbeat_ms"), o.heartbeat_ms, integers(10, 3'600'000));
    visit(OptionName("join_timeout_ms"), o.join_timeout_ms, integers(100, day_ms));
    visit(OptionName("reply_timeout_ms"), o.reply_timeout_ms, integers(100, day_ms));
    visit(OptionName("chunk_elements"), o.chunk_elements, integers(1, 1 << 24));
    visit(OptionName("max_failed_share"), o.max_failed_share, numbers(0.0, 1.0));
    visit(OptionName("checkpoint_seconds"), o.checkpoint_seconds, integers(0, 86'400 * 365));
    visit(OptionName("elastic"), o.elastic, true_or_false());
    visit(OptionName("warmstart_samples"), o.warmstart_samples, integers(0, std::int64_t(1) << 50));
    visit(OptionName("budget_samples"), o.budget_samples, integers(0, std::int64_t(1) << 50));
    visit(OptionName("leases"), o.leases, true_or_false());
    visit(OptionName("max_peers"), o.max_peers, integers(1, 1'000'000));
    visit(OptionName("server_placement"), o.server_placement, one_of({"center", "ranks"}));
    visit(OptionName("servers"), o.servers, integers(1, 256));
    visit(OptionName("codec"), o.codec, one_of(codecs));
    visit(OptionName("reply_codec"), o.reply_codec, one_of(reply_codecs));
    visit(OptionName("topk_ratio"), o.topk_ratio, numbers(0.0, 1.0, true));
}

}  // namespace tether
