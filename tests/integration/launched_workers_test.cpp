// `tether worker` under a launcher's environment (torchrun's variables, set here: Debian's
// torchrun does not run on Python 3.11): no --connect, rank 0 hosts the center and trains too,
// cluster.workers follows the world size, the ranks' CURVE keys come from TETHER_SECRET; a
// config that says otherwise, a missing rank 0 and a rank without a secret fail within seconds,
// naming what was expected. Every wait has a deadline.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <tether/tether.hpp>

#include <csignal>
#include <chrono>
#include <filesystem>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "process_support.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using tether::testing::cluster_config;
using tether::testing::contains;
using tether::testing::free_port;
using tether::testing::free_ports;
using tether::testing::checkpoint_version;
using tether::testing::Process;
using tether::testing::read_summary;
using tether::testing::TempDir;
using tether::testing::write_config;
using Clock = std::chrono::steady_clock;

// As a job script exports it: TETHER_SECRET=$(tether keygen --secret).
const std::string kSecret = "TETHER_SECRET=" + std::string(64, 'c');

// What torchrun sets for rank `rank` of `world` on one host; the center listens at `port`
// (MASTER_PORT + 1: torchrun's own store has MASTER_PORT). With the job's TETHER_SECRET.
std::vector<std::string> torchrun_environment(int rank, int world, int port, const std::string& secret = kSecret) {
    return {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world), "LOCAL_RANK=" + std::to_string(rank),
            "LOCAL_WORLD_SIZE=" + std::to_string(world), "MASTER_ADDR=127.0.0.1",
            "MASTER_PORT=" + std::to_string(port - 1), secret};
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// `cluster_config` with a server on every rank, the workers (and servers) following WORLD_SIZE.
json ranks_config(const std::string& name, const std::string& strategy) {
    json document = cluster_config(name, strategy, 3);
    document["cluster"].erase("workers");
    document["cluster"]["server_placement"] = "ranks";
    return document;
}

// Waits for every rank (2 minutes at most) and checks it exited 0, showing its output when not.
void expect_all_exit_zero(std::vector<std::unique_ptr<Process>>& ranks) {
    for (std::size_t r = 0; r < ranks.size(); ++r) {
        Process& p = *ranks[r];
        const auto code = p.wait(120000);
        CAPTURE(r);
        CAPTURE(p.out());
        CAPTURE(p.err());
        REQUIRE(code.has_value());
        CHECK(*code == 0);
    }
}

}  // namespace

TEST_CASE("three tether workers under torchrun's variables: rank 0 hosts the center and trains too") {
    TempDir dir;
    json document = cluster_config("launched", "adag", 3);
    document["cluster"].erase("workers");  // follows WORLD_SIZE
    const std::string config = write_config(dir, "adag.json", document);
    const std::string run = dir.file("run");
    const int port = free_port();
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < 3; ++r) {
        std::vector<std::string> arguments{"worker", "--config", config};
        if (r == 0) arguments.insert(arguments.end(), {"--out", run});
        ranks.push_back(std::make_unique<Process>(arguments, dir.file("r" + std::to_string(r) + ".out"),
                                                  dir.file("r" + std::to_string(r) + ".err"),
                                                  torchrun_environment(r, 3, port)));
    }
    expect_all_exit_zero(ranks);
    for (int r = 0; r < 3; ++r) {
        const std::string out = ranks[std::size_t(r)]->out();
        CHECK(contains(out, "torchrun: rank " + std::to_string(r) + " of 3 (RANK, WORLD_SIZE)"));
        CHECK(contains(out, "3 workers (rank 0 trains too)"));
        CHECK(contains(out, "done:"));
    }
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    CHECK(summary["workers_joined"] == 3);
    CHECK(summary["workers_finished"] == 3);
    CHECK(summary["workers_lost"] == 0);
    CHECK(summary["run_failed"] == false);
}

TEST_CASE("three tether workers under torchrun's variables, a server on every rank: each rank serves its range") {
    TempDir dir;
    json document = ranks_config("ranks", "averaging");
    const std::string config = write_config(dir, "averaging.json", document);
    const std::string run = dir.file("run");
    const int port = free_ports(3);
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < 3; ++r)
        ranks.push_back(std::make_unique<Process>(std::vector<std::string>{"worker", "--config", config, "--out", run},
                                                  dir.file("r" + std::to_string(r) + ".out"),
                                                  dir.file("r" + std::to_string(r) + ".err"), torchrun_environment(r, 3, port)));
    expect_all_exit_zero(ranks);
    for (int r = 0; r < 3; ++r) {
        const std::string out = ranks[std::size_t(r)]->out();
        CHECK(contains(out, "server " + std::to_string(r) + " of 3 at tcp://127.0.0.1:" + std::to_string(port + r)));
        CHECK(contains(out, "worker " + std::to_string(r) + " done:"));
    }
    // Rank 0's run directory: its evaluations assembled x~ from all three servers (a range left
    // at x~(0) would not learn the problem), and its verdict.
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    CHECK(summary["workers_finished"] == 3);
    CHECK(summary["workers_lost"] == 0);
    CHECK(summary["run_failed"] == false);
    CHECK(summary["final_test_accuracy"].get<double>() > 0.8);
    // Servers 1 and 2 keep their records beside it, each with its own checkpoint.
    for (int k : {1, 2}) {
        const json server = read_summary(run + "/server-" + std::to_string(k));
        CHECK(server["workers_lost"] == 0);
        CHECK(server["run_failed"] == false);
    }
    // The run's model is whole in rank 0's directory alone (the other ranks' directories on
    // hosts of their own): rank 0 kept the final ranges it took beside its own.
    const tether::CenterSnapshot whole = tether::load_checkpoint(run);
    CHECK(whole.x.size() == summary["parameters"].get<std::size_t>());
    for (int k : {1, 2}) std::filesystem::remove_all(run + "/server-" + std::to_string(k));
    CHECK(tether::load_checkpoint(run).x == whole.x);
    std::filesystem::remove(run + "/final-server-1.bin");
    try {
        tether::load_checkpoint(run);
        FAIL("a run directory without server 1's range loaded");
    } catch (const std::exception& e) {
        CHECK(contains(e.what(), "no checkpoint of server 1 of 3"));
        CHECK(contains(e.what(), "rank 1 writes " + run + "/server-1/checkpoint-server-1.bin on its own host"));
    }
}

TEST_CASE("a server on every rank: a rank killed with SIGKILL and restarted with --resume takes its range back") {
    TempDir dir;
    json document = ranks_config("ranks-fault", "averaging");
    document["training"]["epochs"] = 20;
    document["cluster"]["step_delay_ms"] = {10, 10, 10};  // about 8 s of training: the kill lands mid-run
    document["cluster"]["checkpoint_seconds"] = 1;
    const std::string config = write_config(dir, "averaging.json", document);
    const std::string run = dir.file("run");
    const int port = free_ports(3);
    const auto start_rank = [&](int r, const std::string& name, std::vector<std::string> arguments) {
        return std::make_unique<Process>(arguments, dir.file(name + ".out"), dir.file(name + ".err"),
                                         torchrun_environment(r, 3, port));
    };
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < 3; ++r)
        ranks.push_back(start_rank(r, "r" + std::to_string(r), {"worker", "--config", config, "--out", run}));
    // Rank 2's server has checkpointed its range: kill the rank, server and worker at once.
    const std::string checkpoint = run + "/server-2/checkpoint-server-2.bin";
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (!(std::filesystem::exists(checkpoint) && checkpoint_version(checkpoint) > 0) && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE_MESSAGE(std::filesystem::exists(checkpoint), "no checkpoint of server 2 within 30 s");
    REQUIRE(::kill(ranks[2]->pid(), SIGKILL) == 0);
    REQUIRE(ranks[2]->wait(5000).has_value());
    const std::uint64_t saved = checkpoint_version(checkpoint);
    ranks[2] = start_rank(2, "r2-again", {"worker", "--resume", run});
    expect_all_exit_zero(ranks);
    CHECK(contains(ranks[2]->out(), "resumed from"));
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    CHECK(summary["run_failed"] == false);
    CHECK(summary["trained_share"].get<double>() >= 0.9);
    const json server2 = read_summary(run + "/server-2");
    CHECK(server2["center_version"].get<std::uint64_t>() > saved);  // it went on from its checkpoint
}

TEST_CASE("torchrun --max-restarts' next attempt: every rank killed, the same command again; the servers resume by themselves") {
    for (const std::string placement : {"center", "ranks"}) {
        CAPTURE(placement);
        TempDir dir;
        json document = placement == "ranks" ? ranks_config("restarted", "averaging") : cluster_config("restarted", "adag", 3);
        document["cluster"].erase("workers");
        document["training"]["epochs"] = 20;
        document["cluster"]["step_delay_ms"] = {10, 10, 10};  // about 8 s of training: the kill lands mid-run
        document["cluster"]["checkpoint_seconds"] = 1;
        const std::string config = write_config(dir, "config.json", document), run = dir.file("run");
        const int port = free_ports(3);
        const auto start_job = [&](int attempt) {
            std::vector<std::unique_ptr<Process>> ranks;
            for (int r = 0; r < 3; ++r) {
                std::vector<std::string> environment = torchrun_environment(r, 3, port);
                environment.push_back("TORCHELASTIC_RESTART_COUNT=" + std::to_string(attempt));
                const std::string name = "a" + std::to_string(attempt) + "r" + std::to_string(r);
                ranks.push_back(std::make_unique<Process>(std::vector<std::string>{"worker", "--config", config, "--out", run},
                                                          dir.file(name + ".out"), dir.file(name + ".err"), environment));
            }
            return ranks;
        };
        const std::vector<std::string> checkpoints =
            placement == "ranks" ? std::vector<std::string>{run + "/checkpoint-server-0.bin", run + "/server-1/checkpoint-server-1.bin",
                                                            run + "/server-2/checkpoint-server-2.bin"}
                                 : std::vector<std::string>{run + "/checkpoint.bin"};
        const auto checkpointed = [&] {
            for (const std::string& path : checkpoints)
                if (!std::filesystem::exists(path) || checkpoint_version(path) == 0) return false;
            return true;
        };
        std::vector<std::unique_ptr<Process>> first = start_job(0);
        const auto until = Clock::now() + std::chrono::seconds(30);
        while (!checkpointed() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        REQUIRE_MESSAGE(checkpointed(), "no checkpoint of every server within 30 s");
        for (auto& rank : first) REQUIRE(::kill(rank->pid(), SIGKILL) == 0);
        for (auto& rank : first) REQUIRE(rank->wait(5000).has_value());
        std::vector<std::unique_ptr<Process>> again = start_job(1);
        expect_all_exit_zero(again);
        CHECK(contains(again[0]->out(), "rank 0, attempt 1: resuming from " + run));
        const json summary = read_summary(run);
        CAPTURE(summary.dump(2));
        CHECK(summary["run_failed"] == false);
        CHECK(summary["resumed_at_version"].get<std::uint64_t>() > 0);
        if (placement == "ranks") CHECK(contains(again[2]->out(), "rank 2, attempt 1: resuming from " + run + "/server-2"));
    }
}

TEST_CASE("tether run in local mode with a server on every rank starts the ranks itself and judges the run") {
    TempDir dir;
    json document = cluster_config("local-ranks", "diloco", 3);
    document["cluster"]["mode"] = "local";
    document["cluster"]["server_placement"] = "ranks";
    const std::string config = write_config(dir, "diloco.json", document), run = dir.file("run");
    Process tether({"run", config, "--out", run}, dir.file("out"), dir.file("err"));
    const auto code = tether.wait(120000);
    CAPTURE(tether.out());
    CAPTURE(tether.err());
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    CHECK(contains(tether.out(), "started 3 ranks, each a server of x~ and a worker, at 127.0.0.1:"));
    CHECK(contains(tether.out(), "final test accuracy"));  // rank 0's progress, shown by tether run
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    CHECK(summary["worker_exit_status"] == json::array({0, 0, 0}));
    CHECK(summary["workers_finished"] == 3);
    CHECK(summary["run_failed"] == false);
    CHECK(summary["final_test_accuracy"].get<double>() > 0.8);
    for (int k : {1, 2}) CHECK(std::filesystem::exists(run + "/server-" + std::to_string(k) + "/checkpoint-server-" + std::to_string(k) + ".bin"));
    // Embedded (threads in one process) has no ranks to put the servers on: refused at once.
    document["cluster"]["mode"] = "embedded";
    Process embedded({"run", write_config(dir, "embedded.json", document)}, dir.file("e.out"), dir.file("e.err"));
    REQUIRE(embedded.wait(30000) == std::optional<int>(2));
    CHECK(contains(embedded.err(), "cluster.server_placement: \"ranks\" with cluster.mode \"embedded\""));
}

TEST_CASE("a server on every rank with cluster.servers other than the world size fails at once naming both") {
    TempDir dir;
    json document = ranks_config("ranks", "averaging");
    document["cluster"]["servers"] = 2;
    const std::string config = write_config(dir, "averaging.json", document);
    const auto start = Clock::now();
    Process rank0({"worker", "--config", config}, dir.file("r0.out"), dir.file("r0.err"), torchrun_environment(0, 3, free_port()));
    const auto code = rank0.wait(30000);
    REQUIRE(code.has_value());
    CHECK(*code == 2);
    CHECK(seconds_since(start) < 10);
    CAPTURE(rank0.err());
    CHECK(contains(rank0.err(), "cluster.servers: 2 with cluster.server_placement \"ranks\" and cluster.workers 3"));
}

TEST_CASE("under a launcher, a cluster.workers that differs from the world size fails at once naming both") {
    TempDir dir;
    const std::string config = write_config(dir, "adag.json", cluster_config("wrong", "adag", 2));
    const auto start = Clock::now();
    Process rank0({"worker", "--config", config, "--out", dir.file("run")}, dir.file("r0.out"), dir.file("r0.err"),
                  torchrun_environment(0, 3, free_port()));
    const auto code = rank0.wait(30000);
    const double seconds = seconds_since(start);
    CAPTURE(rank0.err());
    REQUIRE(code.has_value());
    CHECK(*code != 0);
    CHECK(seconds < 5);
    CHECK(contains(rank0.err(), "cluster.workers"));
    CHECK(contains(rank0.err(), "2, but the world size is 3 (torchrun: RANK, WORLD_SIZE)"));
}

TEST_CASE("under a launcher, a rank whose center is missing fails within seconds naming the address") {
    TempDir dir;
    const std::string config = write_config(dir, "adag.json", cluster_config("alone", "adag", 2));
    const int port = free_port();
    const auto start = Clock::now();
    Process rank1({"worker", "--config", config}, dir.file("r1.out"), dir.file("r1.err"), torchrun_environment(1, 2, port));
    const auto code = rank1.wait(30000);
    const double seconds = seconds_since(start);
    CAPTURE(rank1.err());
    REQUIRE(code.has_value());
    CHECK(*code != 0);
    CHECK(seconds < 5);
    CHECK(contains(rank1.err(), "nothing listens at tcp://127.0.0.1:" + std::to_string(port)));
    CHECK(contains(rank1.err(), "rank 0 should host the center there (MASTER_ADDR, MASTER_PORT + 1)"));
}

TEST_CASE("under a launcher, a rank with neither TETHER_SECRET nor a job id exits 2 saying how to set it") {
    TempDir dir;
    const std::string config = write_config(dir, "adag.json", cluster_config("keyless", "adag", 2));
    // TETHER_SECRET set but empty: unset, whatever the test's own environment holds.
    Process rank0({"worker", "--config", config, "--out", dir.file("run")}, dir.file("r0.out"), dir.file("r0.err"),
                  torchrun_environment(0, 2, free_port(), "TETHER_SECRET="));
    const auto code = rank0.wait(30000);
    CAPTURE(rank0.err());
    REQUIRE(code.has_value());
    CHECK(*code == 2);
    CHECK(contains(rank0.err(), "export TETHER_SECRET=$(tether keygen --secret)"));
    CHECK(contains(rank0.err(), "security.insecure"));
}
