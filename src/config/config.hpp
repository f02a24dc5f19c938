// The typed run configuration. docs/config.md documents every key; parse_config() and, for the
// cluster, security and strategy blocks, read_cluster_settings() are the code that knows them
// (see util/json_reader.hpp), and tests check that the docs and the code agree.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tether/schedule.hpp>

#include "cluster/cluster_settings.hpp"
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
    double every_seconds = 0;                      // and at most this often by training time (0: by samples only)
    std::optional<double> target_accuracy = 0.88;  // for time_to_target, on the validation set
    std::int64_t test_samples = 0;                 // 0 = the whole test set (evaluated once, at the end)
    bool require_learning = true;                  // a run whose model did not learn fails (record/learning_verdict.hpp)
};

struct RunConfig {
    std::string name = "run";
    DataConfig data;
    ModelConfig model;
    TrainingConfig training;
    EvalConfig eval;
    ClusterSettings cluster;  // with the "security" and "strategy" blocks (cluster/cluster_settings.hpp)

    nlohmann::json resolved;  // every key with its value, defaults filled in
};

// A training.optimizer.schedule block (or the JSON of LearningRateSchedule's constructor).
ScheduleOptions parse_schedule(JsonReader r);

// Parses a config object strictly. Throws ConfigError naming the key, the value and what is
// allowed. When `keys` is given it receives every key the parser knows. Under a `launcher`,
// cluster.workers follows its world size (read_cluster_settings).
RunConfig parse_config(const nlohmann::json& document, std::vector<KeyInfo>* keys = nullptr,
                       const Launcher* launcher = nullptr);

// Reads `path` (JSON), applies the `--set` overrides in order, and parses the result.
// Errors are prefixed with the file name.
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides,
                      const Launcher* launcher = nullptr);

}  // namespace tether
