// A run directory: the resolved config.json, metrics.jsonl (one object per evaluation) and
// summary.json. It also prints the progress lines, so the terminal and the files always
// show the same figures.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>

#include "config/config.hpp"

namespace tether {

struct EvaluationPoint {
    double wall_seconds = 0;       // since the run started, evaluation time included
    double training_seconds = 0;   // time spent training only
    double epoch = 0;              // passes over the training set, fractional
    std::size_t samples = 0;       // training samples processed by all workers together
    double train_loss = 0;         // mean minibatch loss since the previous evaluation
    double test_loss = 0;
    double test_accuracy = 0;
    nlohmann::json extra = nlohmann::json::object();  // strategy / center figures
};

// Writes `value` as pretty JSON to `path`; throws naming the path when it cannot.
void write_json_file(const std::string& path, const nlohmann::json& value);

// The default run directory: runs/<name>-<YYYYmmdd-HHMMSS>.
std::string default_run_directory(const std::string& name);

class RunRecorder {
public:
    RunRecorder(const RunConfig& config, std::string directory);

    const std::string& directory() const { return directory_; }
    void record(const EvaluationPoint& point);
    // Writes summary.json (with `extra` merged in) and returns it.
    nlohmann::json finish(double wall_seconds, double training_seconds, std::size_t samples,
                          const nlohmann::json& extra);

private:
    const RunConfig& config_;
    std::string directory_;
    std::ofstream metrics_;
    std::optional<EvaluationPoint> last_;
    double best_accuracy_ = 0;
    std::optional<double> time_to_target_;
    nlohmann::json provenance_;  // taken when the run starts
};

}  // namespace tether
