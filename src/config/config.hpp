// The typed run configuration. docs/config.md documents every key; parse_config() is the one
// place that knows them (see util/json_reader.hpp), and tests check that the two agree.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tether/schedule.hpp>

#include "codec/codec.hpp"
#include "strategy/configured_strategy.hpp"
#include "util/json_reader.hpp"

namespace tether {

struct DataConfig {
    std::string source = "idx";  // idx | synthetic | cifar10 | cifar100
    std::string dir = "/usr/share/datasets/fashion-mnist";
    std::string train_images = "train-images-idx3-ubyte.gz";
    std::string train_labels = "train-labels-idx1-ubyte.gz";
    std::string test_images = "t10k-images-idx3-ubyte.gz";
    std::string test_labels = "t10k-labels-idx1-ubyte.gz";
    // synthetic
    std::int64_t train_samples = 4000;
    std::int64_t test_samples = 1000;
    std::int64_t features = 32;
    std::int64_t classes = 4;
    double noise = 1.0;
    // Training samples held out as the validation set (data/validation_split.hpp); 0: none,
    // and the test set is evaluated as training goes, as before there was a split.
    std::int64_t validation_samples = 5000;
};

struct ModelConfig {
    std::vector<std::int64_t> hidden_layers{256, 128};  // the MLP, when `layers` is empty
    std::vector<std::string> layers;  // a layer list (docs/models.md), e.g. {"conv 32 3x3 pad 1", "relu", ...}
};

struct OptimizerConfig {
    std::string name = "adam";  // sgd | nesterov | adam
    double learning_rate = 1e-3;
    double momentum = 0.9;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double epsilon = 1e-8;
    // Local steps over which the learning rate ramps linearly up to learning_rate, in epochs
    // of the worker's own shard (0: no ramp).
    double warmup_epochs = 0;
    ScheduleOptions schedule;  // after the warm-up (<tether/schedule.hpp>)
};

struct TrainingConfig {
    std::int64_t epochs = 10;
    std::int64_t batch_size = 64;
    std::string device = "auto";  // auto | cpu | cuda | cuda:N; workers spread over the GPUs
    std::string eval_device = "cpu";  // where the center (or a sequential run) evaluates
    std::int64_t threads = 0;      // CPU threads per worker; 0 = cores / workers
    std::string thread_split = "auto";  // auto | layers | rows: how a CPU worker's threads share a step
    bool flush_denormals = true;   // flush-to-zero + denormals-are-zero on tether's threads
    bool tf32 = false;             // a GPU's GEMMs may round their inputs to TF32 (tensor cores)
    std::int64_t seed = 1;
    OptimizerConfig optimizer;
};

struct EvalConfig {
    std::int64_t per_epoch = 1;                    // evaluations per epoch (validation set), plus one at t = 0
    std::optional<double> target_accuracy = 0.88;  // for time_to_target, on the validation set
    std::int64_t test_samples = 0;                 // 0 = the whole test set (evaluated once, at the end)
};

struct StrategyConfig {
    std::string name = "sequential";
    std::shared_ptr<const ConfiguredStrategy> rule;  // built by the registry from the `strategy` block
};

struct ClusterConfig {
    std::string mode = "embedded";  // embedded | local
    std::int64_t workers = 1;
    std::string endpoint;             // "" = inproc:// (embedded) or tcp://127.0.0.1:* (local)
    double quorum = 0.5;              // share of live workers that closes a round at its deadline
    std::int64_t round_timeout_ms = 30000;
    std::int64_t worker_timeout_ms = 10000;  // silence after which a worker (or the center) counts as lost
    std::int64_t heartbeat_ms = 2000;
    std::int64_t join_timeout_ms = 60000;    // center: waiting for all workers; worker: for welcome
    std::int64_t reply_timeout_ms = 600000;  // worker: waiting for a reply (a synchronous round)
    std::int64_t chunk_elements = 1 << 20;   // elements of one chunk, the largest payload of one message (4 MiB of float32)
    // Extra milliseconds worker k sleeps after each local step (entry k; missing entries 0):
    // simulated stragglers, to study strategies with workers of unequal speed.
    std::vector<std::int64_t> step_delay_ms;
    // A run in which more than this share of the workers failed (diverged, crashed, lost)
    // exits 1, as does a run in which no update reached x~.
    double max_failed_share = 0.5;
    std::int64_t checkpoint_seconds = 60;  // center checkpoint period; 0 = only at the end
    bool elastic = false;                  // workers beyond cluster.workers may join mid-run
    // Each exchange runs on the worker's own thread while it trains the next window; its reply
    // lands one window late (worker/worker_node.hpp, docs/embedding.md).
    bool overlap = false;
    std::int64_t max_peers = 256;          // identities each server keeps state for at once
    std::int64_t servers = 1;              // servers that split x~ into server ranges (protocol/server_ranges.hpp)
    // What crosses the wire (codec/codec.hpp): exchanges (worker -> center) and replies
    // ("same": as codec); topk keeps this share of the elements.
    std::string codec = "float32";
    std::string reply_codec = "same";
    double topk_ratio = 0.01;
    CodecOptions payload_codec() const { return {codec_kind(codec), topk_ratio}; }
    CodecOptions reply_codec_options() const { return {codec_kind(reply_codec == "same" ? codec : reply_codec), topk_ratio}; }
};

// CURVE authentication and encryption (ZeroMQ's, with libsodium). Off when
// center_public_key is empty. Key files hold one Z85 key (40 characters), as `tether keygen`
// writes them.
struct SecurityConfig {
    std::string center_public_key;   // both sides: the center's public key file
    std::string center_secret_key;   // center: its secret key file
    std::string worker_public_key;   // worker: its own key pair
    std::string worker_secret_key;
    std::string authorized_workers;  // center: file of allowed worker public keys, one per line
    bool enabled() const { return !center_public_key.empty(); }
};

struct RunConfig {
    std::string name = "run";
    DataConfig data;
    ModelConfig model;
    TrainingConfig training;
    EvalConfig eval;
    StrategyConfig strategy;
    ClusterConfig cluster;
    SecurityConfig security;

    nlohmann::json resolved;  // every key with its value, defaults filled in
};

// A training.optimizer.schedule block (or the JSON of LearningRateSchedule's constructor).
ScheduleOptions parse_schedule(JsonReader r);

// Parses a config object strictly. Throws ConfigError naming the key, the value and what is
// allowed. When `keys` is given it receives every key the parser knows.
RunConfig parse_config(const nlohmann::json& document, std::vector<KeyInfo>* keys = nullptr);

// Reads `path` (JSON), applies the `--set` overrides in order, and parses the result.
// Errors are prefixed with the file name.
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace tether
