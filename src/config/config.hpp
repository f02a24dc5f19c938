// The typed run configuration. docs/config.md documents every key; parse_config() is the one
// place that knows them (see json_reader.hpp), and tests check that the two agree.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/json_reader.hpp"

namespace tether {

struct DataConfig {
    std::string source = "idx";  // idx | synthetic
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
};

struct ModelConfig {
    std::vector<std::int64_t> hidden_layers{256, 128};
};

struct OptimizerConfig {
    std::string name = "adam";  // sgd | nesterov | adam
    double learning_rate = 1e-3;
    double momentum = 0.9;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double epsilon = 1e-8;
};

struct TrainingConfig {
    std::int64_t epochs = 10;
    std::int64_t batch_size = 64;
    std::string device = "auto";  // auto | cpu | cuda
    std::int64_t threads = 0;      // CPU threads per worker; 0 = cores / workers
    std::int64_t seed = 1;
    OptimizerConfig optimizer;
};

struct EvalConfig {
    std::int64_t per_epoch = 1;                    // evaluations of the test set per epoch
    std::optional<double> target_accuracy = 0.88;  // for time_to_target
    std::int64_t test_samples = 0;                 // 0 = the whole test set
};

struct StrategyConfig {
    std::string name = "sequential";
    nlohmann::json block = nlohmann::json::object();  // the whole `strategy` object, for the strategy's own keys
};

struct ClusterConfig {
    std::string mode = "embedded";  // embedded | local
    std::int64_t workers = 1;
};

struct RunConfig {
    std::string name = "run";
    DataConfig data;
    ModelConfig model;
    TrainingConfig training;
    EvalConfig eval;
    StrategyConfig strategy;
    ClusterConfig cluster;

    nlohmann::json resolved;  // every key with its value, defaults filled in
};

// Parses a config object strictly. Throws ConfigError naming the key, the value and what is
// allowed. When `keys` is given it receives every key the parser knows.
RunConfig parse_config(const nlohmann::json& document, std::vector<KeyInfo>* keys = nullptr);

// Reads `path` (JSON), applies the `--set` overrides in order, and parses the result.
// Errors are prefixed with the file name.
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace tether
