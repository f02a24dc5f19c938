// tether sweep: a 2 x 2 grid on synthetic data runs, writes both summaries, and a rerun skips
// every finished run; a bad grid key is an error before anything runs.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sweep/sweep_plan.hpp"
#include "sweep/sweep_runner.hpp"
#include "test_support.hpp"
#include "util/errors.hpp"

namespace {

const char* kBase = R"({"name": "tiny",
  "data": {"source": "synthetic", "train_samples": 600, "test_samples": 200, "features": 8, "classes": 3},
  "model": {"hidden_layers": [8]},
  "training": {"epochs": 2, "batch_size": 32, "device": "cpu", "threads": 1, "optimizer": {"learning_rate": 0.05}},
  "eval": {"per_epoch": 2},
  "strategy": {"name": "adag"},
  "cluster": {"workers": 2, "join_timeout_ms": 20000}})";

std::string tether_binary() {
    const char* path = std::getenv("TETHER_BIN");
    REQUIRE_MESSAGE(path != nullptr, "set TETHER_BIN to the built tether binary (meson test does)");
    return path;
}

using tether::testing::lines_in;

}  // namespace

TEST_CASE("a 2 x 2 sweep completes, writes summary.csv and summary.md, and resumes") {
    tether::testing::TempDir dir;
    tether::testing::write_text(dir.file("base.json"), kBase);
    tether::testing::write_text(dir.file("sweep.json"), R"({"base": "base.json",
        "grid": {"strategy.name": ["adag", "aeasgd"], "cluster.workers": [1, 2]},
        "reference": {"strategy.name": "adag", "cluster.workers": 1}})");
    const tether::SweepPlan plan = tether::load_sweep(dir.file("sweep.json"));
    REQUIRE(plan.runs.size() == 4);
    CHECK(plan.keys == std::vector<std::string>{"strategy.name", "cluster.workers"});  // file order
    REQUIRE(plan.reference.has_value());
    CHECK(plan.runs[*plan.reference].id == "strategy.name=adag,cluster.workers=1,repeat=0");

    const tether::SweepOptions options{dir.file("out"), 2, tether_binary()};
    const tether::SweepOutcome first = tether::run_sweep(plan, options);
    CHECK(first.completed == 4);
    CHECK(first.failed == 0);
    const std::string table = tether::write_sweep_report(plan, options.directory);
    CHECK(lines_in(dir.file("out/summary.csv")) == 5);  // header + 4 runs
    const std::string csv = tether::testing::read_text(dir.file("out/summary.csv"));
    CHECK(csv.rfind("strategy.name,cluster.workers,repeat,final_test_accuracy,final_validation_accuracy,"
                    "best_validation_accuracy,wall_seconds,time_to_target,time_to_target_bracket_seconds,bytes_sent,"
                    "mean_staleness,temporal_efficiency",
                    0) == 0);
    CHECK(csv.find("missing") == std::string::npos);
    CHECK(tether::testing::read_text(dir.file("out/summary.md")).find("| aeasgd | 2 |") != std::string::npos);
    // The reference compared with itself: efficiency exactly 1.
    CHECK(table.find("| adag | 1 | 0 |") != std::string::npos);
    CHECK(table.find("| 1.0000 | reference |") != std::string::npos);

    const tether::SweepOutcome second = tether::run_sweep(plan, options);
    CHECK(second.skipped == 4);
    CHECK(second.completed == 0);
}

TEST_CASE("a run that diverges is a result: reported as failed with its figures, counted per point, kept on resume") {
    tether::testing::TempDir dir;
    tether::testing::write_text(dir.file("base.json"), kBase);
    // SGD with a step of 1000 diverges within the first steps; 0.05 trains.
    tether::testing::write_text(dir.file("sweep.json"), R"({"base": "base.json",
        "grid": {"training.optimizer.learning_rate": [0.05, 1000]},
        "points": [{"training.optimizer.name": "sgd"}]})");
    const tether::SweepPlan plan = tether::load_sweep(dir.file("sweep.json"));
    const tether::SweepOptions options{dir.file("out"), 1, tether_binary()};
    const tether::SweepOutcome first = tether::run_sweep(plan, options);
    CHECK(first.completed == 1);
    CHECK(first.failed == 1);
    const std::string table = tether::write_sweep_report(plan, options.directory);
    CHECK(table.find("failed: diverged") != std::string::npos);
    CHECK(table.find("missing") == std::string::npos);
    const std::string by_point = tether::testing::read_text(dir.file("out/summary_by_point.csv"));
    CAPTURE(by_point);
    CHECK(by_point.find(",seeds,failed,") != std::string::npos);
    CHECK(by_point.find("\n1000,sgd,1,1,") != std::string::npos);
    const tether::SweepOutcome second = tether::run_sweep(plan, options);
    CHECK(second.skipped == 2);
}

TEST_CASE("a bad grid key or value is a config error naming it, before any run") {
    tether::testing::TempDir dir;
    tether::testing::write_text(dir.file("base.json"), kBase);
    tether::testing::write_text(dir.file("key.json"), R"({"base": "base.json", "grid": {"strategy.nmae": ["adag"]}})");
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("key.json")),
                         doctest::Contains("strategy.nmae: unknown key; did you mean strategy.name?"), tether::ConfigError);
    tether::testing::write_text(dir.file("value.json"), R"({"base": "base.json", "grid": {"cluster.workers": [2, 0]}})");
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("value.json")), doctest::Contains("cluster.workers"),
                         tether::ConfigError);
    tether::testing::write_text(dir.file("grid.json"), R"({"base": "base.json", "grid": {"cluster.workers": 2}})");
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("grid.json")),
                         doctest::Contains("grid.cluster.workers: expected a non-empty list"), tether::ConfigError);
}

TEST_CASE("points vary keys together, each point with every grid combination; bad points are named") {
    tether::testing::TempDir dir;
    tether::testing::write_text(dir.file("base.json"), kBase);
    tether::testing::write_text(dir.file("points.json"), R"({"base": "base.json",
        "grid": {"strategy.name": ["adag", "downpour"]},
        "points": [{"strategy.communication_window": 2, "cluster.workers": 2},
                   {"cluster.workers": 3, "strategy.communication_window": 6}]})");
    const tether::SweepPlan plan = tether::load_sweep(dir.file("points.json"));
    REQUIRE(plan.runs.size() == 4);
    // Keys in file order: the grid's, then the first point's.
    CHECK(plan.keys == std::vector<std::string>{"strategy.name", "strategy.communication_window", "cluster.workers"});
    CHECK(plan.runs[1].id == "strategy.name=adag,strategy.communication_window=6,cluster.workers=3,repeat=0");
    CHECK(plan.runs[1].document["cluster"]["workers"] == 3);
    CHECK(plan.runs[1].document["strategy"]["communication_window"] == 6);
    CHECK(plan.runs[2].document["strategy"]["name"] == "downpour");
    CHECK(plan.runs[2].document["cluster"]["workers"] == 2);
    // Points alone, without a grid.
    tether::testing::write_text(dir.file("only.json"), R"({"base": "base.json", "points": [{"cluster.workers": 2}, {"cluster.workers": 4}]})");
    CHECK(tether::load_sweep(dir.file("only.json")).runs.size() == 2);
    tether::testing::write_text(dir.file("uneven.json"), R"({"base": "base.json",
        "points": [{"cluster.workers": 2}, {"strategy.communication_window": 4}]})");
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("uneven.json")), doctest::Contains("points[1]: names"),
                         tether::ConfigError);
    tether::testing::write_text(dir.file("both.json"), R"({"base": "base.json", "grid": {"cluster.workers": [2]},
        "points": [{"cluster.workers": 2}]})");
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("both.json")), doctest::Contains("also a grid key"), tether::ConfigError);
    tether::testing::write_text(dir.file("badvalue.json"), R"({"base": "base.json", "points": [{"cluster.workers": 0}]})");
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("badvalue.json")), doctest::Contains("cluster.workers"), tether::ConfigError);
}

TEST_CASE("--set reaches every run, --repeats adds seeds, and the summary pools seeds as mean ± sd") {
    tether::testing::TempDir dir;
    tether::testing::write_text(dir.file("base.json"), kBase);
    tether::testing::write_text(dir.file("sweep.json"), R"({"base": "base.json", "grid": {"cluster.workers": [1, 2]}})");
    tether::SweepOverrides overrides;
    overrides.assignments = {"training.epochs=1", "eval.per_epoch=1"};
    overrides.repeats = 2;
    const tether::SweepPlan plan = tether::load_sweep(dir.file("sweep.json"), overrides);
    REQUIRE(plan.runs.size() == 4);  // 2 grid points x 2 seeds
    for (const auto& run : plan.runs) {
        CHECK(run.document["training"]["epochs"] == 1);
        CHECK(run.document["training"]["seed"] == 1 + run.repeat);
    }
    // A grid key cannot be set: the grid would silently win.
    overrides.assignments = {"cluster.workers=4"};
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("sweep.json"), overrides), doctest::Contains("is a grid key"),
                         tether::ConfigError);
    overrides.assignments = {"training.epoch=3"};
    CHECK_THROWS_WITH_AS(tether::load_sweep(dir.file("sweep.json"), overrides),
                         doctest::Contains("training.epoch: unknown key; did you mean training.epochs?"), tether::ConfigError);

    const tether::SweepOptions options{dir.file("out"), 2, tether_binary()};
    CHECK(tether::run_sweep(plan, options).completed == 4);
    const std::string table = tether::write_sweep_report(plan, options.directory);
    const std::string by_point = tether::testing::read_text(dir.file("out/summary_by_point.csv"));
    CHECK(by_point.rfind("cluster.workers,seeds,failed,final_test_accuracy,final_validation_accuracy,best_validation_accuracy,"
                         "wall_seconds,time_to_target,time_to_target_bracket_seconds", 0) == 0);
    CHECK(lines_in(dir.file("out/summary_by_point.csv")) == 3);  // header + 2 grid points
    CHECK(table.find("| 1 | 2 | ") != std::string::npos);        // workers 1, two seeds
    CHECK(table.find(" ± ") != std::string::npos);
}

TEST_CASE("two sweeps cannot run in the same directory at once") {
    tether::testing::TempDir dir;
    // A run long enough (tens of seconds) to be still running when the second sweep starts.
    tether::testing::write_text(dir.file("sweep.json"), R"({"grid": {"cluster.workers": [2]},
        "base": {"name": "slow", "data": {"source": "synthetic", "train_samples": 20000, "test_samples": 200,
                 "features": 64, "classes": 3}, "training": {"epochs": 30, "device": "cpu", "threads": 1},
                 "strategy": {"name": "adag"}, "cluster": {"workers": 2}}})");
    const std::string out = dir.file("out");
    // The first sweep, a child process, holds the lock while it runs.
    const std::string first = tether_binary() + " sweep " + dir.file("sweep.json") + " --out " + out + " > " +
                              dir.file("first.log") + " 2>&1 & echo $! > " + dir.file("first.pid");
    REQUIRE(std::system(first.c_str()) == 0);
    for (int i = 0; i < 200 && !std::ifstream(out + "/sweep.lock"); ++i) std::system("sleep 0.05");
    std::system("sleep 0.3");
    const std::string second = tether_binary() + " sweep " + dir.file("sweep.json") + " --out " + out + " > " +
                               dir.file("second.log") + " 2>&1";
    const int status = std::system(second.c_str());
    CHECK(WEXITSTATUS(status) != 0);
    CHECK(tether::testing::read_text(dir.file("second.log")).find("is in use by another tether sweep") != std::string::npos);
    const std::string stop = "kill -9 $(cat " + dir.file("first.pid") + ") 2>/dev/null; pkill -9 -f " + out + " 2>/dev/null; true";
    std::system(stop.c_str());
}
