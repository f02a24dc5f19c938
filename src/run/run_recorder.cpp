#include "run/run_recorder.hpp"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "run/provenance.hpp"

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

void write_json_file(const std::string& path, const json& value) {
    std::ofstream out(path);
    out << value.dump(2) << "\n";
    if (!out) throw std::runtime_error(path + ": cannot write");
}

RunRecorder::RunRecorder(const RunConfig& config, std::string directory)
    : config_(config), directory_(std::move(directory)), provenance_(current_provenance()) {
    std::error_code error;
    std::filesystem::create_directories(directory_, error);
    if (error) throw std::runtime_error(directory_ + ": cannot create the run directory: " + error.message());
    write_json_file(directory_ + "/config.json", config.resolved);
    metrics_.open(directory_ + "/metrics.jsonl");
    if (!metrics_) throw std::runtime_error(directory_ + "/metrics.jsonl: cannot write");
}

void RunRecorder::record(const EvaluationPoint& p) {
    json line = {{"wall_seconds", p.wall_seconds}, {"training_seconds", p.training_seconds},
                 {"epoch", p.epoch},               {"samples", p.samples},
                 {"train_loss", p.train_loss},     {"test_loss", p.test_loss},
                 {"test_accuracy", p.test_accuracy}};
    line.update(p.extra);
    metrics_ << line.dump() << "\n";
    metrics_.flush();
    best_accuracy_ = std::max(best_accuracy_, p.test_accuracy);
    if (!time_to_target_ && config_.eval.target_accuracy && p.test_accuracy >= *config_.eval.target_accuracy)
        time_to_target_ = p.wall_seconds;
    last_ = p;
}

json RunRecorder::finish(double wall_seconds, double training_seconds, std::size_t samples, const json& extra) {
    json summary = {
        {"name", config_.name},
        {"final_test_accuracy", last_ ? json(last_->test_accuracy) : json(nullptr)},
        {"best_test_accuracy", last_ ? json(best_accuracy_) : json(nullptr)},
        {"final_test_loss", last_ ? json(last_->test_loss) : json(nullptr)},
        {"wall_seconds", wall_seconds},
        {"training_seconds", training_seconds},
        {"samples", samples},
        {"samples_per_second", training_seconds > 0 ? samples / training_seconds : 0.0},
        {"target_accuracy", config_.eval.target_accuracy ? json(*config_.eval.target_accuracy) : json(nullptr)},
        {"time_to_target", time_to_target_ ? json(*time_to_target_) : json(nullptr)},
        {"epochs", config_.training.epochs},
        {"provenance", provenance_},
    };
    summary.update(extra);
    write_json_file(directory_ + "/summary.json", summary);
    return summary;
}

}  // namespace tether
