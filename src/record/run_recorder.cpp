#include "record/run_recorder.hpp"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "record/provenance.hpp"

namespace tether {

using nlohmann::json;

std::string default_run_directory(const std::string& name) {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    std::string base = "runs/" + name + "-" + stamp;
    std::string candidate = base;
    for (int i = 2; std::filesystem::exists(candidate); ++i) candidate = base + "-" + std::to_string(i);
    return candidate;
}

std::string accuracy_line(const json& summary) {
    auto percent = [&](const char* key) {
        const auto it = summary.find(key);
        if (it == summary.end() || !it->is_number()) return std::string();
        char text[32];
        std::snprintf(text, sizeof text, "%.2f%%", 100.0 * it->get<double>());
        return std::string(text);
    };
    const std::string test = percent("final_test_accuracy"), validation = percent("final_validation_accuracy");
    std::string line = "test accuracy " + (test.empty() ? std::string("-") : test);
    if (!validation.empty())
        return line + ", validation accuracy " + validation + " (best " + percent("best_validation_accuracy") + ")";
    const std::string best = percent("best_test_accuracy");
    return best.empty() ? line : line + " (best " + best + ")";
}

void write_json_file(const std::string& path, const json& value) {
    std::ofstream out(path);
    out << value.dump(2) << "\n";
    if (!out) throw std::runtime_error(path + ": cannot write");
}

CurveSet curve_set(const RunConfig& config, const TrainTestSplit& data) {
    if (data.validation) return {"validation", data.validation, 0};
    return {"test", data.test, std::size_t(config.eval.test_samples)};
}

RunRecorder::RunRecorder(const RunConfig& config, std::string directory, bool resuming)
    : config_(config),
      set_(config.data.validation_samples > 0 ? "validation" : "test"),
      directory_(std::move(directory)),
      target_(config.eval.target_accuracy),
      provenance_(current_provenance()) {
    std::error_code error;
    std::filesystem::create_directories(directory_, error);
    if (error) throw std::runtime_error(directory_ + ": cannot create the run directory: " + error.message());
    write_json_file(directory_ + "/config.json", config.resolved);
    metrics_.open(directory_ + "/metrics.jsonl", resuming ? std::ios::app : std::ios::trunc);
    if (!metrics_) throw std::runtime_error(directory_ + "/metrics.jsonl: cannot write");
}

void RunRecorder::record(const EvaluationPoint& p) {
    json line = {{"wall_seconds", p.wall_seconds}, {"training_seconds", p.training_seconds},
                 {"epoch", p.epoch},               {"samples", p.samples},
                 {"train_loss", p.train_loss},     {set_ + "_loss", p.loss},
                 {set_ + "_accuracy", p.accuracy}};
    line.update(p.extra);
    metrics_ << line.dump() << "\n";
    metrics_.flush();
    best_accuracy_ = std::max(best_accuracy_, p.accuracy);
    target_.add(p.wall_seconds, double(p.samples), p.accuracy);
    last_ = p;
}

json RunRecorder::finish(double wall_seconds, double training_seconds, std::size_t samples, const Evaluation& final_test,
                         std::size_t test_samples, const json& extra) {
    const bool split = set_ == "validation";
    auto from_curve = [&](bool wanted, double value) { return wanted && last_ ? json(value) : json(nullptr); };
    const auto& crossing = target_.crossing();
    json summary = {
        {"name", config_.name},
        // The test set, once, on the final model: the figure to report.
        {"final_test_accuracy", final_test.accuracy},
        {"final_test_loss", final_test.loss},
        {"test_samples", test_samples},
        // The curve's set, and what was read off the curve (best, time to target).
        {"evaluation_set", set_},
        {"validation_samples", config_.data.validation_samples},
        {"final_validation_accuracy", from_curve(split, last_ ? last_->accuracy : 0)},
        {"final_validation_loss", from_curve(split, last_ ? last_->loss : 0)},
        {"best_validation_accuracy", from_curve(split, best_accuracy_)},
        // Without a split the best is read off a curve on the test set; reported as such.
        {"best_test_accuracy", from_curve(!split, best_accuracy_)},
        {"wall_seconds", wall_seconds},
        {"training_seconds", training_seconds},
        {"samples", samples},
        {"samples_per_second", training_seconds > 0 ? samples / training_seconds : 0.0},
        {"target_accuracy", config_.eval.target_accuracy ? json(*config_.eval.target_accuracy) : json(nullptr)},
        {"time_to_target", crossing ? json(crossing->seconds) : json(nullptr)},
        {"samples_to_target", crossing ? json(crossing->samples) : json(nullptr)},
        {"time_to_target_bracket_seconds",
         crossing && crossing->bracket_seconds ? json(*crossing->bracket_seconds) : json(nullptr)},
        {"epochs", config_.training.epochs},
        {"provenance", provenance_},
    };
    summary.update(extra);
    write_json_file(directory_ + "/summary.json", summary);
    return summary;
}

}  // namespace tether
