// A whole run on a small separable synthetic problem: it must learn it, and the run directory
// must hold config.json, metrics.jsonl (one line per evaluation on the validation split, the
// first at t = 0) and summary.json with the documented fields (the test set evaluated once).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "run/run.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using tether::testing::TempDir;

constexpr int kEpochs = 3, kPerEpoch = 2, kTrainSamples = 1000, kValidationSamples = 300, kTestSamples = 400;

tether::RunConfig small_config() {
    json document = json::parse(R"({
        "name": "e2e",
        "data": {"source": "synthetic", "train_samples": 1000, "test_samples": 400, "validation_samples": 300,
                 "features": 16, "classes": 4, "noise": 1.0},
        "model": {"hidden_layers": [32]},
        "training": {"epochs": 3, "batch_size": 32, "device": "cpu", "threads": 1, "seed": 5,
                     "optimizer": {"name": "adam", "learning_rate": 0.01}},
        "eval": {"per_epoch": 2, "target_accuracy": 0.9}
    })");
    return tether::parse_config(document);
}

std::vector<json> read_lines(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(json::parse(line));
    return lines;
}

}  // namespace

TEST_CASE("make_synthetic is seeded and balanced") {
    tether::SyntheticSpec spec;
    spec.train_samples = 100;
    spec.test_samples = 40;
    spec.features = 5;
    spec.classes = 4;
    const auto a = tether::make_synthetic(spec), b = tether::make_synthetic(spec);
    CHECK(a.train->size() == 100);
    CHECK(a.test->size() == 40);
    CHECK(a.train->features == 5);
    CHECK(a.train->classes == 4);
    CHECK(a.train->images == b.train->images);
    CHECK(a.test->labels == b.test->labels);
    std::vector<int> counts(4);
    for (auto label : a.train->labels) ++counts[std::size_t(label)];
    CHECK(counts == std::vector<int>{25, 25, 25, 25});
    spec.seed = 8;
    CHECK(tether::make_synthetic(spec).train->images != a.train->images);
}

TEST_CASE("a sequential run learns a separable problem and writes its run directory") {
    TempDir dir;
    const std::string run = dir.file("run");
    const tether::RunConfig config = small_config();
    const json summary = tether::run_experiment(config, run);

    CHECK(summary["final_test_accuracy"].get<double>() >= 0.95);
    CHECK(summary["test_samples"] == kTestSamples);
    CHECK(summary["evaluation_set"] == "validation");
    CHECK(summary["validation_samples"] == kValidationSamples);
    CHECK(summary["final_validation_accuracy"].get<double>() >= 0.95);
    CHECK(summary["best_validation_accuracy"].get<double>() >= summary["final_validation_accuracy"].get<double>());
    CHECK(summary["best_test_accuracy"].is_null());  // the test set is never read as training goes

    REQUIRE(std::filesystem::exists(run + "/config.json"));
    REQUIRE(std::filesystem::exists(run + "/metrics.jsonl"));
    REQUIRE(std::filesystem::exists(run + "/summary.json"));
    // Provenance: which build, where, how and when, so the result can be traced back.
    const json provenance = summary["provenance"];
    CHECK(provenance["tether_version"] == TETHER_VERSION);
    CHECK(!provenance["commit"].get<std::string>().empty());
    CHECK(!provenance["host"].get<std::string>().empty());
    CHECK(provenance["command_line"].get<std::string>().find("test_end_to_end") != std::string::npos);
    CHECK(provenance["start_time"].get<std::string>().size() == 20);  // 2026-01-02T03:04:05Z

    // config.json is the resolved config: given values and defaults.
    const json written_config = json::parse(tether::testing::read_text(run + "/config.json"));
    CHECK(written_config == config.resolved);
    CHECK(written_config["training"]["optimizer"]["beta2"] == 0.999);

    const std::vector<json> metrics = read_lines(run + "/metrics.jsonl");
    REQUIRE(metrics.size() == std::size_t(kEpochs * kPerEpoch + 1));
    // t = 0: the initial parameters, before any step; a 4-class problem starts near chance.
    CHECK(metrics[0]["wall_seconds"] == 0.0);
    CHECK(metrics[0]["samples"] == 0);
    CHECK(metrics[0]["epoch"] == 0.0);
    CHECK(metrics[0]["train_loss"].get<double>() > 0);
    CHECK(metrics[0]["validation_accuracy"].get<double>() < 0.6);
    double previous_wall = 0, previous_epoch = 0;
    std::size_t previous_samples = 0;
    for (std::size_t i = 1; i < metrics.size(); ++i) {
        const json& line = metrics[i];
        CAPTURE(line.dump());
        for (const char* field : {"wall_seconds", "epoch", "samples", "train_loss", "validation_accuracy", "validation_loss"})
            CHECK(line.contains(field));
        CHECK_FALSE(line.contains("test_accuracy"));
        CHECK(line["wall_seconds"].get<double>() >= previous_wall);
        CHECK(line["epoch"].get<double>() > previous_epoch);
        CHECK(line["samples"].get<std::size_t>() > previous_samples);
        CHECK(line["train_loss"].get<double>() > 0);
        CHECK(line["validation_accuracy"].get<double>() >= 0);
        CHECK(line["validation_accuracy"].get<double>() <= 1);
        previous_wall = line["wall_seconds"].get<double>();
        previous_epoch = line["epoch"].get<double>();
        previous_samples = line["samples"].get<std::size_t>();
    }
    // Evaluations fall at the middle and the end of each epoch.
    CHECK(metrics[1]["epoch"].get<double>() == doctest::Approx(0.5).epsilon(0.05));
    CHECK(metrics.back()["epoch"].get<double>() == doctest::Approx(kEpochs));
    CHECK(metrics.back()["samples"] == kEpochs * kTrainSamples);
    CHECK(metrics.back()["validation_accuracy"] == summary["final_validation_accuracy"]);
    CHECK(metrics.back()["validation_loss"] == summary["final_validation_loss"]);

    const json written_summary = json::parse(tether::testing::read_text(run + "/summary.json"));
    CHECK(written_summary == summary);
    for (const char* field : {"final_test_accuracy", "final_test_loss", "best_validation_accuracy", "wall_seconds",
                              "samples_per_second", "time_to_target"})
        CHECK(written_summary.contains(field));
    CHECK(summary["wall_seconds"].get<double>() > 0);
    CHECK(summary["wall_seconds"].get<double>() >= metrics.back()["wall_seconds"].get<double>());
    CHECK(summary["samples_per_second"].get<double>() > 0);
    CHECK(summary["samples"] == kEpochs * kTrainSamples);
    REQUIRE(summary["time_to_target"].is_number());
    CHECK(summary["time_to_target"].get<double>() <= summary["wall_seconds"].get<double>());
    // Read between the last evaluation below the target and the first at or above it.
    std::size_t first = 0;
    while (first < metrics.size() && metrics[first]["validation_accuracy"].get<double>() < 0.9) ++first;
    REQUIRE(first > 0);
    REQUIRE(first < metrics.size());
    const json &below = metrics[first - 1], &above = metrics[first];
    CHECK(summary["time_to_target"].get<double>() > below["wall_seconds"].get<double>());
    CHECK(summary["time_to_target"].get<double>() <= above["wall_seconds"].get<double>());
    CHECK(summary["samples_to_target"].get<double>() > below["samples"].get<double>());
    CHECK(summary["samples_to_target"].get<double>() <= above["samples"].get<double>());
    CHECK(summary["time_to_target_bracket_seconds"].get<double>() ==
          doctest::Approx(above["wall_seconds"].get<double>() - below["wall_seconds"].get<double>()));
    double best = 0;
    for (const json& line : metrics) best = std::max(best, line["validation_accuracy"].get<double>());
    CHECK(summary["best_validation_accuracy"].get<double>() == best);
}

TEST_CASE("with data.validation_samples 0 the curve is on the test set, and its keys say so") {
    TempDir dir;
    json document = small_config().resolved;
    document["data"]["validation_samples"] = 0;
    document["training"]["epochs"] = 1;
    const json summary = tether::run_experiment(tether::parse_config(document), dir.file("run"));
    const std::vector<json> metrics = read_lines(dir.file("run") + "/metrics.jsonl");
    REQUIRE(metrics.size() == std::size_t(kPerEpoch + 1));
    CHECK(metrics[0]["samples"] == 0);
    double best = 0;
    for (const json& line : metrics) {
        CHECK_FALSE(line.contains("validation_accuracy"));
        best = std::max(best, line["test_accuracy"].get<double>());
    }
    CHECK(summary["evaluation_set"] == "test");
    CHECK(summary["best_test_accuracy"].get<double>() == best);
    CHECK(summary["best_validation_accuracy"].is_null());
    CHECK(summary["final_validation_accuracy"].is_null());
    // The one evaluation at the end scores the same parameters on the same samples as the last point.
    CHECK(summary["final_test_accuracy"] == metrics.back()["test_accuracy"]);
}

TEST_CASE("eval.every_seconds: a sequential run also evaluates once in each period of that much training time") {
    TempDir dir;
    json document = small_config().resolved;
    document["data"]["train_samples"] = 20000;
    document["model"]["hidden_layers"] = {128, 128};  // a tenth of a second or more per epoch
    document["training"]["epochs"] = 2;
    document["eval"]["per_epoch"] = 1;
    const double every = 0.005;
    document["eval"]["every_seconds"] = every;
    const json summary = tether::run_experiment(tether::parse_config(document), dir.file("run"));
    const std::vector<json> metrics = read_lines(dir.file("run") + "/metrics.jsonl");
    const double periods = summary["training_seconds"].get<double>() / every;
    CAPTURE(periods);
    CAPTURE(metrics.size());
    REQUIRE(periods > 10);
    // t = 0, the two epochs' ends, and one per period at most (a step longer than a period,
    // on a loaded machine, skips one).
    CHECK(metrics.size() <= std::size_t(periods) + 3);
    CHECK(metrics.size() >= std::size_t(periods / 3));
    // Each evaluation by time (not at an epoch's end) falls in a later period of training time
    // (evaluations excluded) than the evaluation before it.
    for (std::size_t i = 1; i < metrics.size(); ++i) {
        if (metrics[i]["samples"].get<std::size_t>() % 20000 == 0) continue;
        CAPTURE(i);
        const double before = std::floor(metrics[i - 1]["training_seconds"].get<double>() / every);
        CHECK(metrics[i]["training_seconds"].get<double>() / every >= before + 1 - 1e-9);
    }
    CHECK(metrics.back()["samples"] == 40000);
    // The denser curve brackets the target within a period or so.
    REQUIRE(summary["time_to_target_bracket_seconds"].is_number());
    CHECK(summary["time_to_target_bracket_seconds"].get<double>() < summary["wall_seconds"].get<double>() / 2);
}

TEST_CASE("a run that never reaches its target reports time_to_target null") {
    TempDir dir;
    tether::RunConfig config = small_config();
    json document = config.resolved;
    document["training"]["epochs"] = 1;
    document["eval"]["per_epoch"] = 1;
    document["eval"]["target_accuracy"] = 1.0;
    document["data"]["noise"] = 50.0;  // no model can reach 100% on this
    config = tether::parse_config(document);
    const json summary = tether::run_experiment(config, dir.file("run"));
    CHECK(summary["time_to_target"].is_null());
    CHECK(summary["samples_to_target"].is_null());
    CHECK(summary["time_to_target_bracket_seconds"].is_null());
    CHECK(summary["target_accuracy"] == 1.0);
}

TEST_CASE("the same seed gives the same run on one CPU thread") {
    TempDir dir;
    tether::RunConfig config = small_config();
    json document = config.resolved;
    document["training"]["epochs"] = 1;
    config = tether::parse_config(document);
    const json first = tether::run_experiment(config, dir.file("first"));
    const json second = tether::run_experiment(config, dir.file("second"));
    CHECK(first["final_test_accuracy"] == second["final_test_accuracy"]);
    CHECK(first["final_test_loss"] == second["final_test_loss"]);
    const std::vector<json> a = read_lines(dir.file("first") + "/metrics.jsonl");
    const std::vector<json> b = read_lines(dir.file("second") + "/metrics.jsonl");
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i]["train_loss"] == b[i]["train_loss"]);
}
