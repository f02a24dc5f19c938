// A run directory: the resolved config.json, metrics.jsonl (one object per row) and
// summary.json. The tether command writes one row per evaluation; the embedding API writes the
// center's exchange statistics at its cadence and the scalars its workers log.
//
// Every evaluation during training (the curve, best accuracy, time to target) is on the
// validation split; the test set is evaluated once, on the final model, and reported apart.
// With data.validation_samples 0 there is no split and the curve is on the test set, as it
// was before the split existed: the keys then say `test_` instead of `validation_`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>

#include "record/target_crossing.hpp"

namespace tether {

// What the run directory is told of its run: the tether command fills it from its RunConfig
// (run/run_records.hpp), the embedding API from its options; what a run does not know stays
// unset and is written as null.
struct RecordSettings {
    std::string name = "run";
    nlohmann::json config = nlohmann::json::object();  // written as config.json: every setting as resolved
    // The curve's set: rows with "<curve_set>_accuracy" make the curve ("validation", or "test"
    // for a run without a validation split).
    std::string curve_set = "validation";
    std::optional<std::int64_t> validation_samples;  // data.validation_samples
    std::optional<double> target_accuracy;           // eval.target_accuracy
    std::optional<std::int64_t> epochs;              // training.epochs
    // The curve set's largest class share: the accuracy a model that learned nothing reaches
    // by always answering that class (record/learning_verdict.hpp); unset where unknown.
    std::optional<double> chance_accuracy = {};
    bool require_learning = true;  // eval.require_learning
};

struct EvaluationPoint {
    double wall_seconds = 0;       // since the run started, evaluation time included
    double training_seconds = 0;   // time spent training only
    double epoch = 0;              // passes over the training set, fractional
    std::size_t samples = 0;       // training samples processed by all workers together
    double train_loss = 0;         // mean minibatch loss since the previous evaluation
    double loss = 0;               // on the curve set
    double accuracy = 0;
    nlohmann::json extra = nlohmann::json::object();  // strategy / center figures
};

// The one evaluation of the final model on the test set.
struct FinalTest {
    double accuracy = 0, loss = 0;
    std::size_t samples = 0;
};

// Writes `value` as pretty JSON to `path`; throws naming the path when it cannot.
void write_json_file(const std::string& path, const nlohmann::json& value);

// "test accuracy 88.12%, validation accuracy 88.40% (best 88.90%)" from a summary.json; reads
// summaries written before the validation split too ("test accuracy 88.12% (best 88.90%)").
std::string accuracy_line(const nlohmann::json& summary);

// The default run directory: runs/<name>-<YYYYmmdd-HHMMSS>.
std::string default_run_directory(const std::string& name);

// Thread-safe: rows may come from several threads (the API's statistics and workers' scalars).
class RunRecorder {
public:
    // Creates `directory` and writes config.json. `resuming`: metrics.jsonl is appended to (the
    // run goes on from a checkpoint), not restarted.
    RunRecorder(RecordSettings settings, std::string directory, bool resuming = false);

    const std::string& directory() const { return directory_; }
    const RecordSettings& settings() const { return settings_; }
    // One evaluation, as a row of metrics.jsonl.
    void record(const EvaluationPoint& point);
    // Any row; one holding a number under "<curve_set>_accuracy" is a point of the curve too
    // (its best, last and time to target go into the summary).
    void append(const nlohmann::json& row);
    // Writes summary.json (with `extra` merged in) and returns it. `final_test`: the one
    // evaluation of the final model on the test set, if the run made one.
    nlohmann::json finish(double wall_seconds, double training_seconds, std::size_t samples,
                          const std::optional<FinalTest>& final_test, const nlohmann::json& extra);

private:
    const RecordSettings settings_;
    std::string directory_;
    std::mutex mutex_;  // the stream and the curve below
    std::ofstream metrics_;
    std::optional<double> last_accuracy_;
    std::optional<double> initial_loss_, initial_accuracy_;  // the curve's point at 0 samples (x~(0))
    nlohmann::json last_loss_;  // of the last point of the curve; null when its row had none
    double best_accuracy_ = 0;
    TargetWatch target_;  // time_to_target, interpolated between evaluations
    nlohmann::json provenance_;  // taken when the run starts
};

}  // namespace tether
