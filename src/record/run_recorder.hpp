// A run directory: the resolved config.json, metrics.jsonl (one object per evaluation) and
// summary.json. It also prints the progress lines, so the terminal and the files always
// show the same figures.
//
// Every evaluation during training (the curve, best accuracy, time to target) is on the
// validation split; the test set is evaluated once, on the final model, and reported apart.
// With data.validation_samples 0 there is no split and the curve is on the test set, as it
// was before the split existed: the keys then say `test_` instead of `validation_`.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "record/target_crossing.hpp"
#include "train/evaluator.hpp"

namespace tether {

// The samples the curve is measured on: "validation" (the split) or "test" (no split).
struct CurveSet {
    std::string name;
    std::shared_ptr<const Dataset> data;
    std::size_t limit = 0;  // eval.test_samples applies to the test set only
};
CurveSet curve_set(const RunConfig& config, const TrainTestSplit& data);

struct EvaluationPoint {
    double wall_seconds = 0;       // since the run started, evaluation time included
    double training_seconds = 0;   // time spent training only
    double epoch = 0;              // passes over the training set, fractional
    std::size_t samples = 0;       // training samples processed by all workers together
    double train_loss = 0;         // mean minibatch loss since the previous evaluation
    double loss = 0;               // on the curve set (CurveSet)
    double accuracy = 0;
    nlohmann::json extra = nlohmann::json::object();  // strategy / center figures
};

// Writes `value` as pretty JSON to `path`; throws naming the path when it cannot.
void write_json_file(const std::string& path, const nlohmann::json& value);

// "test accuracy 88.12%, validation accuracy 88.40% (best 88.90%)" from a summary.json; reads
// summaries written before the validation split too ("test accuracy 88.12% (best 88.90%)").
std::string accuracy_line(const nlohmann::json& summary);

// The default run directory: runs/<name>-<YYYYmmdd-HHMMSS>.
std::string default_run_directory(const std::string& name);

class RunRecorder {
public:
    // `resuming`: metrics.jsonl is appended to (the run goes on from a checkpoint), not restarted.
    RunRecorder(const RunConfig& config, std::string directory, bool resuming = false);

    const std::string& directory() const { return directory_; }
    void record(const EvaluationPoint& point);
    // Writes summary.json (with `extra` merged in) and returns it. `final_test` is the one
    // evaluation of the final model on the test set, over `test_samples` samples.
    nlohmann::json finish(double wall_seconds, double training_seconds, std::size_t samples, const Evaluation& final_test,
                          std::size_t test_samples, const nlohmann::json& extra);

private:
    const RunConfig& config_;
    std::string set_;  // CurveSet::name
    std::string directory_;
    std::ofstream metrics_;
    std::optional<EvaluationPoint> last_;
    double best_accuracy_ = 0;
    TargetWatch target_;  // time_to_target, interpolated between evaluations
    nlohmann::json provenance_;  // taken when the run starts
};

}  // namespace tether
