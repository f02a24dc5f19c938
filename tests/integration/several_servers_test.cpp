// A center of several servers (cluster.servers): S servers each own a server range of x~,
// workers exchange with all of them in parallel. A deterministic synchronous run gives bit for bit the same x~
// with 1 server as with 3; every strategy trains with 2 servers, with and without a codec;
// the embedding API serves several; and `tether server --server K/S` runs them as processes
// (with CURVE keys), server 0 evaluating x~ assembled from every range.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <tether/tether.hpp>

#include "center/checkpoint.hpp"
#include "config/config.hpp"
#include "integration/process_support.hpp"
#include "run/run.hpp"
#include "strategy/registry.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using namespace tether::testing;

// x~ at the end of a run, from its final checkpoints (one per server), in key order.
std::vector<float> final_center(const std::string& run, int servers) {
    if (servers == 1) return tether::read_checkpoint(run + "/checkpoint.bin").x;
    std::vector<float> x;
    for (int k = 0; k < servers; ++k) {
        const auto part = tether::read_checkpoint(run + "/checkpoint-server-" + std::to_string(k) + ".bin").x;
        x.insert(x.end(), part.begin(), part.end());
    }
    return x;
}

json servers_config(const std::string& strategy, int workers, int servers) {
    json c = cluster_config("servers-" + strategy, strategy, workers);
    c["cluster"]["servers"] = servers;
    c["data"]["validation_samples"] = 0;
    if (strategy == "eamsgd") c["training"]["optimizer"] = {{"name", "nesterov"}, {"learning_rate", 0.05}, {"momentum", 0.9}};
    return c;
}

}  // namespace

TEST_CASE("a deterministic synchronous run ends with the same x~ on 1 server as on 3") {
    for (const std::string strategy : {"averaging", "diloco"}) {
        CAPTURE(strategy);
        std::vector<std::vector<float>> finals;
        std::vector<json> summaries;
        for (int servers : {1, 3}) {
            TempDir dir;
            // Two workers: their x_i are summed in double, where a + b = b + a exactly, so the
            // order in which each server hears them does not matter.
            const auto config = tether::parse_config(servers_config(strategy, 2, servers));
            summaries.push_back(tether::run_experiment(config, dir.file("run")));
            finals.push_back(final_center(dir.file("run"), servers));
        }
        REQUIRE(finals[0].size() == 8 * 16 + 16 + 16 * 3 + 3);
        CHECK(finals[0] == finals[1]);  // bit for bit
        CHECK(summaries[1]["servers"] == 3);
        CHECK(summaries[1]["server_versions"] == json::array({summaries[0]["center_version"], summaries[0]["center_version"],
                                                               summaries[0]["center_version"]}));
        CHECK(summaries[1]["final_test_accuracy"] == summaries[0]["final_test_accuracy"]);
        CHECK(summaries[1]["rounds"] == summaries[0]["rounds"]);
    }
}

TEST_CASE("every strategy trains with 2 servers, and with a codec on top") {
    for (const std::string& strategy : tether::strategy_names()) {
        if (strategy == "sequential") continue;
        for (const std::string codec : {"float32", "int8"}) {
            CAPTURE(strategy);
            CAPTURE(codec);
            json document = servers_config(strategy, 3, 2);
            document["cluster"]["codec"] = codec;
            TempDir dir;
            const json summary = tether::run_experiment(tether::parse_config(document), dir.file("run"));
            CAPTURE(summary.dump(2));
            CHECK(summary["final_test_accuracy"].get<double>() >= 0.9);
            CHECK(summary["servers"] == 2);
            CHECK(summary["workers_finished"] == 3);
            CHECK(summary["rejected_messages"] == 0);
            CHECK(summary["workers_lost"] == 0);
            // Every worker exchange reaches both servers: their versions move together.
            const auto versions = summary["server_versions"];
            CHECK(versions[0] == versions[1]);
            CHECK(versions[0] == summary["center_version"]);
        }
    }
}

TEST_CASE("the embedding API serves x~ from several servers; snapshot and wait assemble it") {
    tether::ServiceOptions options;
    options.strategy = R"({"name": "downpour", "communication_window": 1})";
    options.workers = 2;
    options.servers = 3;
    const std::vector<float> initial{1, 2, 3, 4, 5, 6, 7};
    auto center = tether::CenterService::start(initial, options);
    const std::string addresses = center->address();
    CHECK(std::count(addresses.begin(), addresses.end(), ',') == 2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w)
        threads.emplace_back([&, w] {
            std::vector<float> x(initial.size());
            auto worker = center->connect_worker(x.data(), x.size());
            for (int step = 0; step < 4; ++step) {
                for (std::size_t i = 0; i < x.size(); ++i) x[i] += float(w + 1) * float(i + 1);
                worker->step(1);
            }
            worker->finish();
        });
    for (auto& t : threads) t.join();
    const std::vector<float> x = center->wait();
    // downpour adds every update: x~ = initial + 4 steps * (1 + 2) * (i + 1), whatever the order.
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == doctest::Approx(initial[i] + 12.f * float(i + 1)));
    CHECK(center->snapshot().x == x);
    const json stats = json::parse(center->stats_json());
    CHECK(stats["updates_applied"] == 8);
    CHECK(stats["workers_finished"] == 2);
    options.servers = 8;  // more servers than parameters
    CHECK_THROWS_WITH_AS(tether::CenterService::start(initial, options), doctest::Contains("ServiceOptions.servers: 8"),
                         tether::ConfigError);
}

TEST_CASE("a worker that waits long for server 0's welcome joins the other servers all the same") {
    // Server 0 welcomes no one until every worker has said hello; meanwhile the first worker's
    // wait heartbeats its other sessions. Before they had said hello, server 1 refused those as
    // an unknown worker, and the worker failed to join (seen on 10 Mbit/s links, where server
    // 0's welcome takes longer than a heartbeat).
    tether::ServiceOptions options;
    options.strategy = R"({"name": "downpour", "communication_window": 1})";
    options.workers = 2;
    options.servers = 2;
    options.heartbeat_ms = 50;
    const std::vector<float> initial{1, 2, 3, 4};
    auto center = tether::CenterService::start(initial, options);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(2);
    for (int w = 0; w < 2; ++w)
        threads.emplace_back([&, w] {
            if (w == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));  // 12 heartbeats late
            try {
                std::vector<float> x(initial.size());
                auto worker = center->connect_worker(x.data(), x.size());
                for (std::size_t i = 0; i < x.size(); ++i) x[i] += 1.f;
                worker->step(1);
                worker->finish();
            } catch (const std::exception& e) {
                errors[std::size_t(w)] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    CHECK(errors[0] == "");
    CHECK(errors[1] == "");
    const std::vector<float> x = center->wait();
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == doctest::Approx(initial[i] + 2.f));
}

TEST_CASE("tether server --server K/S: two server processes, server 0 evaluates x~ from both ranges") {
    TempDir dir;
    // Server 1 gives its range of x~ only to joined workers and to peers holding an allowed key,
    // as server 0 does here; without keys server 0 refuses to start, saying so.
    json document = servers_config("adag", 2, 2);
    Process keyless({"server", "--config", write_config(dir, "keyless.json", document), "--server", "0/2", "--bind",
                     "tcp://127.0.0.1:*", "--other-servers", "tcp://127.0.0.1:1", "--out", dir.file("k")},
                    dir.file("k.out"), dir.file("k.err"));
    CHECK(keyless.wait(20000) == std::optional<int>(2));
    CHECK(contains(keyless.err(), "--other-servers: servers 1..1 give their ranges of x~ only to peers holding an allowed CURVE key"));
    document["security"] = keygen_security(dir);
    const std::string config = write_config(dir, "c.json", document);
    Process second({"server", "--config", config, "--server", "1/2", "--bind", "tcp://127.0.0.1:*", "--out", dir.file("s1")},
                   dir.file("s1.out"), dir.file("s1.err"));
    const std::string a1 = listening_addresses(second, dir.file("s1.out"));
    Process first({"server", "--config", config, "--server", "0/2", "--bind", "tcp://127.0.0.1:*", "--other-servers", a1,
                   "--out", dir.file("s0")},
                  dir.file("s0.out"), dir.file("s0.err"));
    const std::string a0 = listening_addresses(first, dir.file("s0.out"));
    // A worker that lists the servers in the wrong order is refused, naming the setting.
    Process swapped({"worker", "--config", config, "--connect", a1 + "," + a0}, dir.file("x.out"), dir.file("x.err"));
    CHECK(swapped.wait(30000) == std::optional<int>(1));
    CHECK(contains(swapped.err(), "cluster.server: center 1, worker 0"));
    Process w0({"worker", "--config", config, "--connect", a0 + "," + a1}, dir.file("w0.out"), dir.file("w0.err"));
    Process w1({"worker", "--config", config, "--connect", a0 + "," + a1}, dir.file("w1.out"), dir.file("w1.err"));
    const auto w0_exit = w0.wait(90000), w1_exit = w1.wait(30000);
    const auto first_exit = first.wait(30000), second_exit = second.wait(30000);
    CAPTURE(w0.err());
    CAPTURE(w1.err());
    CAPTURE(first.err());
    CAPTURE(second.err());
    CHECK(w0_exit == std::optional<int>(0));
    CHECK(w1_exit == std::optional<int>(0));
    CHECK(first_exit == std::optional<int>(0));
    CHECK(second_exit == std::optional<int>(0));
    const json lead = read_summary(dir.file("s0")), other = read_summary(dir.file("s1"));
    CAPTURE(lead.dump(2));
    CAPTURE(other.dump(2));
    CHECK(lead["final_test_accuracy"].get<double>() >= 0.9);
    CHECK(lead["workers_finished"] == 2);
    CHECK(other["server"] == 1);
    CHECK(other["workers_finished"] == 2);
    CHECK(other["center_version"] == lead["center_version"]);
    CHECK_FALSE(other.contains("final_test_accuracy"));  // server 0 evaluates
    CHECK(contains(second.out(), "server 1 of 2 done"));
}

TEST_CASE("a local run with 2 servers writes one checkpoint per server, and --resume goes on from both (nothing left to train)") {
    TempDir dir;
    json document = servers_config("downpour", 2, 2);
    document["cluster"]["mode"] = "local";  // worker processes, each server on its own ipc:// socket
    const std::string config = write_config(dir, "c.json", document), run = dir.file("run");
    Process first({"run", config, "--out", run}, dir.file("1.out"), dir.file("1.err"));
    REQUIRE(first.wait(90000) == std::optional<int>(0));
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    CHECK(summary["worker_exit_status"] == json::array({0, 0}));
    CHECK(summary["final_test_accuracy"].get<double>() >= 0.9);
    std::vector<std::uint64_t> saved;
    for (int k = 0; k < 2; ++k) saved.push_back(tether::read_checkpoint(run + "/checkpoint-server-" + std::to_string(k) + ".bin").version);
    CHECK(saved[0] == summary["center_version"].get<std::uint64_t>());
    CHECK(saved[1] == summary["server_versions"][1].get<std::uint64_t>());
    Process again({"run", "--resume", run}, dir.file("2.out"), dir.file("2.err"));
    const auto again_exit = again.wait(90000);
    CAPTURE(again.out());
    CAPTURE(again.err());
    CHECK(again_exit == std::optional<int>(0));
    for (int k = 0; k < 2; ++k) {
        const std::string path = run + "/checkpoint-server-" + std::to_string(k) + ".bin";
        CHECK(contains(again.out(), "server " + std::to_string(k) + "/2: resumed from " + path + " at center version " +
                                        std::to_string(saved[std::size_t(k)]) + " "));
        // The run had finished: every place trained its shard, so nothing is trained again.
        CHECK(tether::read_checkpoint(path).version == saved[std::size_t(k)]);
    }
}

TEST_CASE("server and worker command lines that do not fit cluster.servers are refused, saying what would") {
    TempDir dir;
    const std::string config = write_config(dir, "c.json", servers_config("adag", 1, 2));
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"server", "--config", config, "--server", "2/2", "--bind", "tcp://127.0.0.1:*"}, "expected K/S with 0 <= K < S"},
        {{"server", "--config", config, "--server", "1/3", "--bind", "tcp://127.0.0.1:*"}, "cluster.servers is 2"},
        // The old name of --server still works, and says so.
        {{"server", "--config", config, "--shard", "1/3", "--bind", "tcp://127.0.0.1:*"}, "--shard is deprecated; it is now --server"},
        {{"server", "--config", config, "--shard", "1/3", "--bind", "tcp://127.0.0.1:*"}, "--server 1/3: cluster.servers is 2"},
        {{"server", "--config", config, "--server", "0/2", "--bind", "tcp://127.0.0.1:*"}, "--other-servers A1"},
        {{"server", "--config", config, "--bind", "tcp://127.0.0.1:*"}, "give one address per server"},
        {{"worker", "--config", config, "--connect", "tcp://127.0.0.1:9"}, "1 address(es), but cluster.servers is 2"},
    };
    int i = 0;
    for (const auto& [arguments, expected] : cases) {
        CAPTURE(expected);
        Process p(arguments, dir.file(std::to_string(i) + ".out"), dir.file(std::to_string(i) + ".err"));
        ++i;
        CHECK(p.wait(30000) == std::optional<int>(2));
        CHECK(contains(p.err(), expected));
    }
}
