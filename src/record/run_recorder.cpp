#include "record/run_recorder.hpp"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "record/learning_verdict.hpp"
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
    // Written beside it and renamed over it: a reader (a local run's ranks read config.json
    // while rank 0 writes it) sees the old file or the new one, never half of one.
    const std::string written = path + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(written);
        out << value.dump(2) << "\n";
        if (!out) throw std::runtime_error(path + ": cannot write");
    }
    std::error_code error;
    std::filesystem::rename(written, path, error);
    if (error) throw std::runtime_error(path + ": cannot write (" + error.message() + ")");
}

RunRecorder::RunRecorder(RecordSettings settings, std::string directory, bool resuming)
    : settings_(std::move(settings)),
      directory_(std::move(directory)),
      target_(settings_.target_accuracy),
      provenance_(current_provenance()) {
    std::error_code error;
    std::filesystem::create_directories(directory_, error);
    if (error) throw std::runtime_error(directory_ + ": cannot create the run directory: " + error.message());
    write_json_file(directory_ + "/config.json", settings_.config);
    metrics_.open(directory_ + "/metrics.jsonl", resuming ? std::ios::app : std::ios::trunc);
    if (!metrics_) throw std::runtime_error(directory_ + "/metrics.jsonl: cannot write");
}

void RunRecorder::record(const EvaluationPoint& p) {
    const std::string& set = settings_.curve_set;
    json line = {{"wall_seconds", p.wall_seconds}, {"training_seconds", p.training_seconds},
                 {"epoch", p.epoch},               {"samples", p.samples},
                 {"train_loss", p.train_loss},     {set + "_loss", p.loss},
                 {set + "_accuracy", p.accuracy}};
    line.update(p.extra);
    append(line);
}

void RunRecorder::append(const json& row) {
    std::lock_guard<std::mutex> lock(mutex_);
    metrics_ << row.dump() << "\n";
    metrics_.flush();
    const auto accuracy = row.find(settings_.curve_set + "_accuracy");
    if (accuracy == row.end() || !accuracy->is_number()) return;
    const double value = accuracy->get<double>();
    const auto loss = row.find(settings_.curve_set + "_loss");
    last_loss_ = loss != row.end() && loss->is_number() ? *loss : json(nullptr);
    if (row.value("samples", 0.0) == 0 && !initial_accuracy_ && last_loss_.is_number()) {
        initial_accuracy_ = value;  // the model as it started (a resumed run's first row is not)
        initial_loss_ = last_loss_.get<double>();
    }
    best_accuracy_ = last_accuracy_ ? std::max(best_accuracy_, value) : value;
    last_accuracy_ = value;
    target_.add(row.value("wall_seconds", 0.0), row.value("samples", 0.0), value);
}

json RunRecorder::finish(double wall_seconds, double training_seconds, std::size_t samples,
                         const std::optional<FinalTest>& final_test, const json& extra) {
    std::lock_guard<std::mutex> lock(mutex_);
    const RecordSettings& s = settings_;
    const bool split = s.curve_set == "validation";
    auto from_curve = [&](bool wanted, const json& value) { return wanted && last_accuracy_ ? value : json(nullptr); };
    auto known = [](const auto& value) { return value ? json(*value) : json(nullptr); };
    const auto& crossing = target_.crossing();
    json summary = {
        {"name", s.name},
        // The test set, once, on the final model: the figure to report.
        {"final_test_accuracy", final_test ? json(final_test->accuracy) : json(nullptr)},
        {"final_test_loss", final_test ? json(final_test->loss) : json(nullptr)},
        {"test_samples", final_test ? json(final_test->samples) : json(nullptr)},
        // The curve's set, and what was read off the curve (best, time to target).
        {"evaluation_set", s.curve_set},
        {"validation_samples", known(s.validation_samples)},
        {"final_validation_accuracy", from_curve(split, last_accuracy_.value_or(0))},
        {"final_validation_loss", from_curve(split, last_loss_)},
        {"best_validation_accuracy", from_curve(split, best_accuracy_)},
        // Without a split the best is read off a curve on the test set; reported as such.
        {"best_test_accuracy", from_curve(!split, best_accuracy_)},
        {"wall_seconds", wall_seconds},
        {"training_seconds", training_seconds},
        {"samples", samples},
        {"samples_per_second", training_seconds > 0 ? samples / training_seconds : 0.0},
        {"target_accuracy", known(s.target_accuracy)},
        {"time_to_target", crossing ? json(crossing->seconds) : json(nullptr)},
        {"samples_to_target", crossing ? json(crossing->samples) : json(nullptr)},
        {"time_to_target_bracket_seconds",
         crossing && crossing->bracket_seconds ? json(*crossing->bracket_seconds) : json(nullptr)},
        {"epochs", known(s.epochs)},
        {"provenance", provenance_},
    };
    summary.update(extra);
    // Whether the model learned, from the curve's first and last points (the final test where
    // there is no curve).
    LearningFacts facts;
    facts.initial_loss = initial_loss_;
    facts.final_loss = last_loss_.is_number() ? std::optional<double>(last_loss_.get<double>())
                       : final_test              ? std::optional<double>(final_test->loss)
                                                 : std::nullopt;
    facts.final_accuracy = last_accuracy_ ? last_accuracy_ : final_test ? std::optional<double>(final_test->accuracy) : std::nullopt;
    facts.chance_accuracy = s.chance_accuracy;
    judge_learning(summary, s.curve_set, facts, s.require_learning);
    write_json_file(directory_ + "/summary.json", summary);
    return summary;
}

}  // namespace tether
