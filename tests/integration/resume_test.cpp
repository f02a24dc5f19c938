// Resume that works when it is needed, through the built `tether` binary on
// 127.0.0.1: a center killed in the first seconds of a run leaves a checkpoint that
// `tether server --resume` goes on from; workers wait for a restarted center; counting goes on
// from the checkpoint without counting a sample twice; a center stopped for 15 s loses no worker.
// Every wait has a deadline (process_support.hpp).
#include <doctest/doctest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "process_support.hpp"
#include "test_support.hpp"

namespace {

using namespace tether::testing;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A two-worker run of about 12 s of training (more on a loaded machine): long enough that a
// kill a few seconds in lands mid-run.
json long_run(const std::string& name) {
    json document = cluster_config(name, "aeasgd", 2);
    document["training"]["epochs"] = 30;
    document["cluster"]["step_delay_ms"] = {10, 10};
    return document;
}

// `tether server` on an OS-picked port of 127.0.0.1 writing the run directory `run`, and two
// workers of `config` joined to it.
struct ServerAndWorkers {
    ServerAndWorkers(const TempDir& dir, const std::string& config, const std::string& run)
        : server({"server", "--config", config, "--bind", "tcp://127.0.0.1:*", "--out", run}, dir.file("s.out"),
                 dir.file("s.err")),
          address(start_server(server, dir, dir.file("s.out"))),
          first({"worker", "--config", config, "--connect", address}, dir.file("w0.out"), dir.file("w0.err")),
          second({"worker", "--config", config, "--connect", address}, dir.file("w1.out"), dir.file("w1.err")) {}
    Process server;
    const std::string address;
    Process first, second;
};

// Counting after a resume: every planned sample once (at most one window per worker more, as
// a last window's claim may run ahead of the shard's end), and no metrics row past the
// planned epochs.
void check_counted_once(const std::string& run, const json& document) {
    const json summary = read_summary(run);
    const auto planned = summary["samples_planned"].get<std::uint64_t>();
    const auto samples = summary["samples"].get<std::uint64_t>();
    const std::uint64_t window = 4 * 16;  // communication_window x batch_size
    MESSAGE("samples " << samples << " of " << planned << " planned (trained_share " << summary["trained_share"] << ")");
    CHECK(samples <= planned + 2 * window);
    CHECK(samples >= planned * 9 / 10);
    CHECK(summary["run_failed"] == false);
    double last_epoch = 0;
    std::ifstream metrics(run + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
        const json row = json::parse(line);
        if (row.contains("epoch") && row["epoch"].is_number()) last_epoch = std::max(last_epoch, row["epoch"].get<double>());
    }
    MESSAGE("metrics reach epoch " << last_epoch << " of " << document["training"]["epochs"]);
    CHECK(last_epoch <= document["training"]["epochs"].get<double>() + 0.01);
}

}  // namespace

TEST_CASE("a center killed 5 s into a run at the default checkpoint_seconds leaves a checkpoint to resume from") {
    TempDir dir;
    json document = long_run("early");
    REQUIRE(!document["cluster"].contains("checkpoint_seconds"));  // the default, 60 s
    const std::string config = write_config(dir, "c.json", document), run = dir.file("run");
    ServerAndWorkers job(dir, config, run);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    REQUIRE_MESSAGE(!job.server.poll(), "the run ended before the kill: make it longer");
    REQUIRE(::kill(job.server.pid(), SIGKILL) == 0);
    REQUIRE(job.server.wait(5000).has_value());
    const std::string checkpoint = run + "/checkpoint.bin";
    REQUIRE_MESSAGE(std::filesystem::exists(checkpoint), "no checkpoint 5 s into the run");
    const std::uint64_t saved = checkpoint_version(checkpoint);
    CHECK(saved > 0);
    // The whole job is restarted here: the old workers go too, and fresh ones join the resumed center.
    for (Process* worker : {&job.first, &job.second}) {
        ::kill(worker->pid(), SIGKILL);
        worker->wait(5000);
    }

    Process resumed({"server", "--resume", run, "--bind", job.address}, dir.file("r.out"), dir.file("r.err"));
    const std::string line = wait_for_line(dir.file("r.out"), "resumed from", 20000, resumed);
    CAPTURE(resumed.err());
    REQUIRE(!line.empty());
    CHECK(contains(line, "at center version " + std::to_string(saved) + " "));
    Process third({"worker", "--config", config, "--connect", job.address}, dir.file("w2.out"), dir.file("w2.err"));
    Process fourth({"worker", "--config", config, "--connect", job.address}, dir.file("w3.out"), dir.file("w3.err"));
    CHECK(third.wait(120000) == std::optional<int>(0));
    CHECK(fourth.wait(30000) == std::optional<int>(0));
    CHECK(resumed.wait(30000) == std::optional<int>(0));
    const json summary = read_summary(run);
    MESSAGE("killed 5 s in: checkpoint at version " << saved << "; resumed run ended at version " << summary["center_version"]);
    CHECK(summary["center_version"].get<std::uint64_t>() > saved);
    // The fresh workers take the places over where the checkpoint left them, not from the start.
    CHECK(contains(third.err() + fourth.err(), "its place has trained"));
    check_counted_once(run, document);
}

TEST_CASE("workers wait cluster.center_restart_ms for a killed center: resumed 12 s later, the run completes") {
    TempDir dir;
    json document = long_run("restart");
    document["cluster"]["center_restart_ms"] = 20000;  // the default is 60 s; the test stays short
    const std::string config = write_config(dir, "c.json", document), run = dir.file("run");
    ServerAndWorkers job(dir, config, run);
    std::this_thread::sleep_for(std::chrono::seconds(4));
    REQUIRE_MESSAGE(!job.server.poll(), "the run ended before the kill: make it longer");
    REQUIRE(::kill(job.server.pid(), SIGKILL) == 0);
    REQUIRE(job.server.wait(5000).has_value());
    const std::uint64_t saved = checkpoint_version(run + "/checkpoint.bin");
    std::this_thread::sleep_for(std::chrono::seconds(12));  // 8x cluster.worker_timeout_ms (1.5 s)
    CAPTURE(job.first.err());
    CAPTURE(job.second.err());
    REQUIRE_MESSAGE(!job.first.poll(), "a worker gave up on its center within 12 s");
    REQUIRE_MESSAGE(!job.second.poll(), "a worker gave up on its center within 12 s");
    CHECK(contains(job.first.err(), "waiting up to 20000 ms in all (cluster.center_restart_ms)"));

    Process resumed({"server", "--resume", run, "--bind", job.address}, dir.file("r.out"), dir.file("r.err"));
    REQUIRE(!wait_for_line(dir.file("r.out"), "resumed from", 20000, resumed).empty());
    const auto first_exit = job.first.wait(120000), second_exit = job.second.wait(30000), resumed_exit = resumed.wait(30000);
    CAPTURE(resumed.err());
    CHECK(first_exit == std::optional<int>(0));
    CHECK(second_exit == std::optional<int>(0));
    CHECK(resumed_exit == std::optional<int>(0));
    CHECK(contains(job.first.err() + job.second.err(), "joining again"));
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    MESSAGE("center killed 4 s in and resumed 12 s later from version " << saved << ": the run ended at version "
                                                                           << summary["center_version"] << ", trained_share "
                                                                           << summary["trained_share"]);
    CHECK(summary["workers_finished"] == 2);
    CHECK(summary["workers_lost"] == 0);
    CHECK(summary["center_version"].get<std::uint64_t>() > saved);
    // What the workers trained between the checkpoint and the kill counts once, when they come back.
    check_counted_once(run, document);
}

TEST_CASE("a center stopped for 15 s (SIGSTOP) at the default timeouts costs time, not the run") {
    TempDir dir;
    json document = long_run("outage");
    // The defaults: a 10 s worker timeout, a 2 s heartbeat, a 60 s restart window.
    for (const char* key : {"worker_timeout_ms", "heartbeat_ms"}) document["cluster"].erase(key);
    const std::string config = write_config(dir, "c.json", document), run = dir.file("run");
    ServerAndWorkers job(dir, config, run);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    REQUIRE_MESSAGE(!job.server.poll(), "the run ended before the outage: make it longer");
    REQUIRE(::kill(job.server.pid(), SIGSTOP) == 0);
    std::this_thread::sleep_for(std::chrono::seconds(15));
    const bool workers_alive = !job.first.poll() && !job.second.poll();
    REQUIRE(::kill(job.server.pid(), SIGCONT) == 0);
    CAPTURE(job.first.err());
    CAPTURE(job.second.err());
    CHECK_MESSAGE(workers_alive, "a worker gave up during the 15 s outage");
    CHECK(job.first.wait(120000) == std::optional<int>(0));
    CHECK(job.second.wait(30000) == std::optional<int>(0));
    CHECK(job.server.wait(30000) == std::optional<int>(0));
    CAPTURE(job.server.err());
    const json summary = read_summary(run);
    MESSAGE("15 s SIGSTOP of the center: workers_lost " << summary["workers_lost"] << ", trained_share "
                                                                       << summary["trained_share"]);
    CHECK(summary["workers_lost"] == 0);
    CHECK(summary["workers_finished"] == 2);
    check_counted_once(run, document);
}

TEST_CASE("an elastic joiner never trains a live worker's shard; it takes over what a lost worker's place left") {
    TempDir dir;
    json document = long_run("elastic");
    document["cluster"]["elastic"] = true;
    document["cluster"]["step_delay_ms"] = {10, 10};
    const std::string config = write_config(dir, "c.json", document), run = dir.file("run");
    ServerAndWorkers job(dir, config, run);
    REQUIRE(wait_for_training(run, 30000, job.server));
    // Both places are live: a third worker has no shard of its own and trains none of theirs.
    Process extra({"worker", "--config", config, "--connect", job.address}, dir.file("w2.out"), dir.file("w2.err"));
    CHECK(extra.wait(30000) == std::optional<int>(0));
    CAPTURE(extra.err());
    CHECK(contains(extra.out(), " 0 exchanges"));
    // A place is lost (its worker killed); a joiner takes over what it had not trained.
    REQUIRE(::kill(job.second.pid(), SIGKILL) == 0);
    job.second.wait(5000);
    REQUIRE(!wait_for_line(dir.file("s.err"), "center: worker", 20000, job.server).empty());
    Process joiner({"worker", "--config", config, "--connect", job.address}, dir.file("w3.out"), dir.file("w3.err"));
    CHECK(job.first.wait(120000) == std::optional<int>(0));
    CHECK(joiner.wait(60000) == std::optional<int>(0));
    CHECK(job.server.wait(30000) == std::optional<int>(0));
    CAPTURE(joiner.err());
    CAPTURE(job.server.err());
    CHECK(contains(joiner.err(), "its place has trained"));
    const json summary = read_summary(run);
    MESSAGE("elastic: a joiner while both places were live, then one after a loss: samples " << summary["samples"] << " of "
                                                                                           << summary["samples_planned"]);
    check_counted_once(run, document);
}

TEST_CASE("a worker killed and restarted at once takes its place back at once, with what the place trained") {
    TempDir dir;
    json document = long_run("restarted");
    for (const char* key : {"worker_timeout_ms", "heartbeat_ms"}) document["cluster"].erase(key);  // 10 s, 2 s
    const std::string config = write_config(dir, "c.json", document), run = dir.file("run");
    ServerAndWorkers job(dir, config, run);
    REQUIRE(wait_for_training(run, 30000, job.server));
    std::this_thread::sleep_for(std::chrono::seconds(2));
    REQUIRE(::kill(job.second.pid(), SIGKILL) == 0);
    job.second.wait(5000);
    const auto restarted_at = Clock::now();
    Process again({"worker", "--config", config, "--connect", job.address}, dir.file("w2.out"), dir.file("w2.err"));
    const std::string taken = wait_for_line(dir.file("w2.err"), "worker ", 20000, again);
    const double seconds = std::chrono::duration<double>(Clock::now() - restarted_at).count();
    CAPTURE(again.err());
    CAPTURE(job.server.err());
    CHECK(contains(taken, "its place has trained"));
    MESSAGE("the restarted worker took its place back " << seconds << " s after it started (cluster.worker_timeout_ms 10 s)");
    CHECK(seconds < 8.0);
    CHECK(job.first.wait(120000) == std::optional<int>(0));
    CHECK(again.wait(60000) == std::optional<int>(0));
    CHECK(job.server.wait(30000) == std::optional<int>(0));
    CHECK(contains(job.server.err(), "its connection is closed"));
    const json summary = read_summary(run);
    CHECK(summary["places_retaken"] == 1);
    check_counted_once(run, document);
}
