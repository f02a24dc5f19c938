// The `tether` binary's contract: exit code 0 on success, 2 for a usage or config error (with
// the message on stderr), 1 for a runtime failure. The binary's path comes from meson in
// TETHER_BIN.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using nlohmann::json;
using tether::testing::TempDir;

struct Result {
    int exit_code = -1;
    std::string out, err;
};

std::string tether_binary() {
    const char* path = std::getenv("TETHER_BIN");
    REQUIRE_MESSAGE(path != nullptr, "set TETHER_BIN to the built tether binary (meson test does)");
    return path;
}

// Runs tether with `arguments`, in `directory`, capturing stdout and stderr.
Result run_tether(const std::vector<std::string>& arguments, const TempDir& scratch) {
    const std::string binary = tether_binary();
    const std::string out_path = scratch.file("stdout.txt"), err_path = scratch.file("stderr.txt");
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || chdir(scratch.path().c_str()) != 0)
            _exit(127);
        std::vector<char*> argv{const_cast<char*>(binary.c_str())};
        for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(binary.c_str(), argv.data());
        _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = tether::testing::read_text(out_path);
    r.err = tether::testing::read_text(err_path);
    return r;
}

using tether::testing::contains;

const char* kSyntheticConfig = R"({
    "name": "cli",
    "data": {"source": "synthetic", "train_samples": 400, "test_samples": 200, "features": 8, "classes": 3},
    "model": {"hidden_layers": [16]},
    "training": {"epochs": 2, "batch_size": 32, "device": "cpu", "threads": 1,
                 "optimizer": {"name": "adam", "learning_rate": 0.01}},
    "eval": {"per_epoch": 1, "target_accuracy": 0.5}
})";

}  // namespace

TEST_CASE("tether --help and tether version exit 0") {
    TempDir scratch;
    const Result help = run_tether({"--help"}, scratch);
    CHECK(help.exit_code == 0);
    CHECK(contains(help.out, "tether run"));
    CHECK(contains(help.out, "exit codes"));

    const Result version = run_tether({"version"}, scratch);
    CHECK(version.exit_code == 0);
    CHECK(contains(version.out, "tether "));
    CHECK(contains(version.out, "CUDA"));

    const Result run_help = run_tether({"run", "--help"}, scratch);
    CHECK(run_help.exit_code == 0);
    CHECK(contains(run_help.out, "--set"));
}

TEST_CASE("usage errors exit 2 with the message on stderr") {
    TempDir scratch;
    const Result nothing = run_tether({}, scratch);
    CHECK(nothing.exit_code == 2);
    CHECK(contains(nothing.err, "usage"));

    const Result no_config = run_tether({"run"}, scratch);
    CHECK(no_config.exit_code == 2);
    CHECK(contains(no_config.err, "config"));

    const Result unknown_command = run_tether({"frobnicate"}, scratch);
    CHECK(unknown_command.exit_code == 2);
    CHECK(contains(unknown_command.err, "frobnicate"));

    tether::testing::write_text(scratch.file("ok.json"), kSyntheticConfig);
    const Result unknown_flag = run_tether({"run", scratch.file("ok.json"), "--bogus"}, scratch);
    CHECK(unknown_flag.exit_code == 2);
    CHECK(contains(unknown_flag.err, "bogus"));

    const Result missing_config = run_tether({"run", scratch.file("missing.json")}, scratch);
    CHECK(missing_config.exit_code == 2);
    CHECK(contains(missing_config.err, scratch.file("missing.json")));
}

TEST_CASE("config errors exit 2 with the message on stderr") {
    TempDir scratch;
    const std::string config = scratch.file("typo.json");
    tether::testing::write_text(config, R"({"training": {"optimiser": {"name": "sgd"}}})");
    const Result typo = run_tether({"run", config}, scratch);
    CHECK(typo.exit_code == 2);
    CHECK(contains(typo.err, config + ": training.optimiser: unknown key; did you mean training.optimizer?"));
    CHECK(typo.out.empty());

    tether::testing::write_text(scratch.file("ok.json"), kSyntheticConfig);
    const Result bad_set = run_tether({"run", scratch.file("ok.json"), "--set", "training.epochs=0"}, scratch);
    CHECK(bad_set.exit_code == 2);
    CHECK(contains(bad_set.err, "training.epochs"));

    const Result malformed_set = run_tether({"run", scratch.file("ok.json"), "--set", "training.epochs"}, scratch);
    CHECK(malformed_set.exit_code == 2);
    CHECK(contains(malformed_set.err, "KEY=VALUE"));

    tether::testing::write_text(scratch.file("broken.json"), "{ not json");
    const Result broken = run_tether({"run", scratch.file("broken.json")}, scratch);
    CHECK(broken.exit_code == 2);
    CHECK(contains(broken.err, "not valid JSON"));

    // No run directory is made for a config that does not parse.
    CHECK_FALSE(std::filesystem::exists(scratch.file("runs")));
}

TEST_CASE("a missing data file is a runtime failure: exit 1") {
    TempDir scratch;
    const std::filesystem::path empty = scratch.path() / "empty-data";
    std::filesystem::create_directory(empty);
    const std::string config = scratch.file("idx.json");
    tether::testing::write_text(config, json{{"name", "nodata"},
                                             {"data", {{"source", "idx"}, {"dir", empty.string()}}},
                                             {"training", {{"device", "cpu"}, {"threads", 1}}}}
                                            .dump());
    const Result r = run_tether({"run", config, "--out", scratch.file("run")}, scratch);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, (empty / "train-images-idx3-ubyte.gz").string()));
}

TEST_CASE("tether run on a synthetic problem exits 0 and writes its run directory") {
    TempDir scratch;
    const std::string config = scratch.file("synthetic.json");
    tether::testing::write_text(config, kSyntheticConfig);
    const std::string out = scratch.file("the-run");
    const Result r = run_tether({"run", config, "--set", "training.seed=3", "--out", out}, scratch);
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, "final test accuracy"));
    REQUIRE(std::filesystem::exists(out + "/summary.json"));
    const json summary = json::parse(tether::testing::read_text(out + "/summary.json"));
    CHECK(summary["final_test_accuracy"].get<double>() > 0.9);
    const json config_json = json::parse(tether::testing::read_text(out + "/config.json"));
    CHECK(config_json["training"]["seed"] == 3);
    CHECK(std::filesystem::exists(out + "/metrics.jsonl"));
}

TEST_CASE("a run whose model learned nothing exits 1 saying so; eval.require_learning false makes it a warning") {
    // A learning rate far too large ends worse than it started, sequential and distributed
    // alike: that must not exit 0. At 10 the loss grows to thousands without turning non-finite.
    TempDir scratch;
    const std::string config = scratch.file("synthetic.json");
    tether::testing::write_text(config, kSyntheticConfig);
    for (const std::string strategy : {"sequential", "adag"}) {
        CAPTURE(strategy);
        const std::vector<std::string> run = {"run", config, "--set", "strategy.name=" + strategy, "--set",
                                              "training.optimizer.name=sgd", "--set", "training.optimizer.learning_rate=10",
                                              "--set", "cluster.workers=" + std::string(strategy == "sequential" ? "1" : "2")};
        std::vector<std::string> failing = run, warned = run;
        failing.insert(failing.end(), {"--out", scratch.file(strategy + "-failing")});
        const Result r = run_tether(failing, scratch);
        CAPTURE(r.out);
        CAPTURE(r.err);
        CHECK(r.exit_code == 1);
        CHECK(contains(r.err, "tether: run FAILED: the model did not learn: final validation loss "));
        const json failed = json::parse(tether::testing::read_text(scratch.file(strategy + "-failing") + "/summary.json"));
        CHECK(failed["learned"] == false);
        CHECK(failed["run_failed"] == true);
        CHECK(failed["final_validation_loss"].get<double>() > failed["initial_validation_loss"].get<double>());

        warned.insert(warned.end(), {"--set", "eval.require_learning=false", "--out", scratch.file(strategy + "-warned")});
        const Result w = run_tether(warned, scratch);
        CAPTURE(w.err);
        CHECK(w.exit_code == 0);
        CHECK(contains(w.err, "tether: warning: the model did not learn"));
        const json kept = json::parse(tether::testing::read_text(scratch.file(strategy + "-warned") + "/summary.json"));
        CHECK(kept["learned"] == false);
        CHECK(kept.value("run_failed", false) == false);
    }
}

TEST_CASE("tether run without --out makes runs/<name>-<timestamp>") {
    TempDir scratch;
    tether::testing::write_text(scratch.file("synthetic.json"), kSyntheticConfig);
    const Result r = run_tether({"run", scratch.file("synthetic.json"), "--set", "training.epochs=1"}, scratch);
    REQUIRE(r.exit_code == 0);
    std::vector<std::filesystem::path> runs;
    for (const auto& entry : std::filesystem::directory_iterator(scratch.path() / "runs")) runs.push_back(entry.path());
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].filename().string().rfind("cli-", 0) == 0);
    CHECK(std::filesystem::exists(runs[0] / "summary.json"));
}

// A strategy of one's own for the `tether` command: tests/packaging/damped_sum_plugin.cpp, built
// against the public headers alone, loaded with --plugin (its path in TETHER_PLUGIN).
TEST_CASE("tether run --plugin: a strategy from a shared library, embedded and in worker processes") {
    const char* plugin = std::getenv("TETHER_PLUGIN");
    REQUIRE_MESSAGE(plugin != nullptr, "set TETHER_PLUGIN to the built damped_sum plugin (meson test does)");
    TempDir scratch;
    json config = json::parse(kSyntheticConfig);
    config["strategy"] = {{"name", "damped-sum"}, {"communication_window", 2}};
    config["cluster"] = {{"workers", 2}};
    tether::testing::write_text(scratch.file("mine.json"), config.dump());

    const Result unknown = run_tether({"run", scratch.file("mine.json")}, scratch);
    CHECK(unknown.exit_code == 2);
    CHECK(contains(unknown.err, "strategy.name: \"damped-sum\" is not allowed"));

    for (const char* mode : {"embedded", "local"}) {
        CAPTURE(mode);
        const std::string out = scratch.file(std::string("run-") + mode);
        const Result run = run_tether({"run", scratch.file("mine.json"), "--plugin", plugin, "--set",
                                       std::string("cluster.mode=") + mode, "--out", out},
                                      scratch);
        CAPTURE(run.err);
        REQUIRE(run.exit_code == 0);
        const json summary = json::parse(tether::testing::read_text(out + "/summary.json"));
        CHECK(summary["strategy"] == "damped-sum");
        CHECK(summary["strategy_parameters"]["scale"].get<double>() == doctest::Approx(0.5));  // 1 / workers
        CHECK(summary["workers_finished"] == 2);
    }

    const Result keys = run_tether({"config-keys", "--plugin=" + std::string(plugin)}, scratch);
    CHECK(keys.exit_code == 0);
    CHECK(contains(keys.out, "\"key\":\"strategy.scale\""));

    const Result missing = run_tether({"run", scratch.file("mine.json"), "--plugin", scratch.file("none.so")}, scratch);
    CHECK(missing.exit_code == 2);
    CHECK(contains(missing.err, "--plugin " + scratch.file("none.so") + ": cannot be loaded"));
}
