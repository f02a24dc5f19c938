// A CenterService's run directory (ServiceOptions::run_dir, src/api/service_record.hpp): the
// files `tether run` writes (config.json, metrics.jsonl with the center's exchange statistics
// and the workers' logged scalars, exchanges.jsonl, checkpoint.bin, summary.json with provenance
// and verdict), resuming from its checkpoint, and a failed run's summary.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using nlohmann::json;
using tether::testing::contains;
using tether::testing::TempDir;
using Vec = std::vector<float>;

constexpr int kWorkers = 2;
constexpr std::size_t kBatch = 8;

std::vector<json> rows_of(const std::string& path) {
    std::vector<json> rows;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) rows.push_back(json::parse(line));
    return rows;
}

json read_json(const std::string& path) { return json::parse(tether::testing::read_text(path)); }

tether::ServiceOptions options_in(const std::string& run_dir) {
    tether::ServiceOptions o;
    o.strategy = R"({"name": "adag", "communication_window": 2})";
    o.workers = kWorkers;
    o.join_timeout_ms = 10000;
    o.run_dir = run_dir;
    o.metrics_seconds = 0.05;
    return o;
}

// kWorkers threads train `steps` steps each (x_i += 0.01, buffers set to w + step), sleeping
// 5 ms a step, and log their loss and validation accuracy every 5 steps; returns the final state.
tether::CenterSnapshot train(tether::CenterService& center, int steps) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kWorkers);
    for (int w = 0; w < kWorkers; ++w)
        threads.emplace_back([&, w] {
            try {
                Vec x(4), b(2);
                auto worker = center.connect_worker({{x.data(), x.size()}}, tether::Memory::host, {{b.data(), b.size()}});
                for (int s = 0; s < steps; ++s) {
                    for (float& v : x) v += 0.01f;
                    b.assign(2, float(w + s));
                    worker->step(kBatch);
                    if (s % 5 == 0) worker->log({{"loss", 1.0 / (s + 1)}, {"validation_accuracy", 0.5 + 0.02 * s}});
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                }
                worker->finish();
                CHECK_THROWS_AS(worker->log({{"loss", 0.0}}), std::logic_error);  // it has left
            } catch (const std::exception& e) {
                errors[std::size_t(w)] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
    return center.wait_state();
}

}  // namespace

TEST_CASE("run_dir: the run directory of `tether run`, with the workers' scalars, and resumed from its checkpoint") {
    TempDir dir;
    const std::string run = dir.file("api-run");
    auto center = tether::CenterService::start(Vec(4, 0.f), options_in(run), Vec{1.f, 1.f});
    const tether::CenterSnapshot first = train(*center, 20);
    center.reset();  // the summary is written when the run ends, before wait() returns

    const json config = read_json(run + "/config.json");
    CHECK(config["name"] == "api-run");
    CHECK(config["cluster"]["workers"] == kWorkers);
    CHECK(config["cluster"]["checkpoint_seconds"] == 60);
    CHECK(config["strategy"]["name"] == "adag");
    CHECK(config["strategy"]["communication_window"] == 2);
    CHECK(config["model"] == json{{"parameters", 4}, {"buffers", 2}});
    CHECK(config["record"] == json{{"metrics_seconds", 0.05}, {"metrics_samples", 0}});

    const std::vector<json> rows = rows_of(run + "/metrics.jsonl");
    std::vector<json> center_rows, worker_rows;
    for (const json& r : rows) (r.contains("worker") ? worker_rows : center_rows).push_back(r);
    REQUIRE(center_rows.size() >= 2);
    for (const char* key : {"wall_seconds", "training_seconds", "samples", "center_version", "live_workers", "bytes_to_center",
                            "bytes_to_workers", "rejected_messages", "mean_staleness", "samples_per_second"})
        CHECK_MESSAGE(center_rows.front().contains(key), key);
    CHECK(center_rows.back()["center_version"] == first.version);  // the last row is the final state
    CHECK(center_rows.back()["samples"] == kWorkers * 20 * kBatch);
    CHECK(center_rows.back()["rejected_messages"] == 0);
    REQUIRE(worker_rows.size() == kWorkers * 4);  // steps 0, 5, 10 and 15
    for (const json& r : worker_rows) {
        CHECK(r["worker"].get<int>() < kWorkers);
        CHECK(r["worker_samples"].get<int>() % kBatch == 0);
        CHECK(r["worker_samples"].get<int>() > 0);
        CHECK(r.contains("loss"));
        CHECK(r["wall_seconds"].get<double>() >= 0);
    }

    const json summary = read_json(run + "/summary.json");
    CHECK(summary["run_failed"] == false);
    CHECK(summary["strategy"] == "adag");
    CHECK(summary["workers"] == kWorkers);
    CHECK(summary["mode"] == "api");
    CHECK(summary["parameters"] == 4);
    CHECK(summary["buffers"] == 2);
    CHECK(summary["center_version"] == first.version);
    CHECK(summary["samples"] == kWorkers * 20 * kBatch);
    CHECK(summary["exchanges"] == rows_of(run + "/exchanges.jsonl").size());
    CHECK(summary["final_validation_accuracy"].get<double>() == doctest::Approx(0.8));  // both logged 0.8 last
    CHECK(summary["best_validation_accuracy"].get<double>() == doctest::Approx(0.8));
    CHECK(summary["final_test_accuracy"].is_null());  // nobody logged one
    CHECK(summary["provenance"].contains("commit"));
    CHECK(summary["provenance"]["tether_version"] == TETHER_VERSION_STRING);

    const tether::CenterSnapshot saved = tether::load_checkpoint(run);
    CHECK(saved.version == first.version);
    CHECK(saved.x == first.x);
    CHECK(saved.buffers == first.buffers);

    // Resumed: x~, b~ and the version go on from the checkpoint, whatever `initial` says, and the
    // logs grow after the first run's lines.
    tether::ServiceOptions again = options_in(run);
    again.resume = true;
    auto resumed = tether::CenterService::start(Vec(4, 9.f), again, Vec{9.f, 9.f});
    const tether::CenterSnapshot start = resumed->snapshot();
    CHECK(start.version == first.version);
    CHECK(start.x == first.x);
    CHECK(start.buffers == first.buffers);
    const tether::CenterSnapshot second = train(*resumed, 6);
    resumed.reset();
    CHECK(second.version > first.version);
    CHECK(rows_of(run + "/metrics.jsonl").size() > rows.size());
    CHECK(read_json(run + "/summary.json")["center_version"] == second.version);
    CHECK(read_json(run + "/summary.json")["exchanges"] == rows_of(run + "/exchanges.jsonl").size());
    CHECK(tether::load_checkpoint(run + "/checkpoint.bin").version == second.version);
}

TEST_CASE("resume refuses what it cannot go on from, naming the file or the option") {
    TempDir dir;
    tether::ServiceOptions o = options_in(dir.file("empty"));
    o.resume = true;
    CHECK_THROWS_WITH(tether::CenterService::start(Vec(4), o, Vec(2)), doctest::Contains("no checkpoint to resume from"));
    o.run_dir.clear();
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(4), o), doctest::Contains("ServiceOptions.resume: true without ServiceOptions.run_dir"),
                         tether::ConfigError);

    // A checkpoint of a run with other settings (another window) is not resumed.
    const std::string run = dir.file("run");
    {
        auto center = tether::CenterService::start(Vec(4), options_in(run), Vec(2));
        train(*center, 4);
    }
    tether::ServiceOptions other = options_in(run);
    other.strategy = R"({"name": "adag", "communication_window": 4})";
    other.resume = true;
    const std::string refused = run + "/checkpoint.bin: written by a run with other settings";
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(4), other, Vec(2)), doctest::Contains(refused.c_str()),
                         tether::ConfigError);
    tether::ServiceOptions bad = options_in(run);
    bad.metrics_seconds = -1;
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(4), bad, Vec(2)), doctest::Contains("ServiceOptions.metrics_seconds"),
                         tether::ConfigError);
}

TEST_CASE("metrics_samples: a row each time the workers together pass a multiple of it") {
    TempDir dir;
    tether::ServiceOptions o = options_in(dir.file("by-samples"));
    o.metrics_seconds = 0;
    o.metrics_samples = 64;
    auto center = tether::CenterService::start(Vec(4), o, Vec(2));
    train(*center, 30);
    center.reset();
    std::vector<std::uint64_t> samples;
    for (const json& r : rows_of(dir.file("by-samples") + "/metrics.jsonl"))
        if (!r.contains("worker")) samples.push_back(r["samples"]);
    REQUIRE(samples.size() >= 3);
    // The first row is at the start; each later one (but the final one) crossed a multiple of 64.
    for (std::size_t i = 1; i + 1 < samples.size(); ++i) CHECK(samples[i] / 64 > samples[i - 1] / 64);
    CHECK(samples.back() == kWorkers * 30 * kBatch);
}

TEST_CASE("a run that fails still writes its summary, saying why") {
    TempDir dir;
    tether::ServiceOptions o = options_in(dir.file("failed"));
    o.join_timeout_ms = 300;  // nobody joins
    auto center = tether::CenterService::start(Vec(4), o);
    CHECK_THROWS_WITH(center->wait(), doctest::Contains("joined within 300 ms"));
    const json summary = read_json(dir.file("failed") + "/summary.json");
    CHECK(summary["run_failed"] == true);
    CHECK(contains(summary["failure_reason"].get<std::string>(), "only 0 of 2 workers joined"));
    CHECK(summary["provenance"].contains("start_time"));
}

TEST_CASE("a run whose workers are lost says so in its summary, by the verdict of `tether run`") {
    TempDir dir;
    tether::ServiceOptions o = options_in(dir.file("lost"));
    o.worker_timeout_ms = 400;  // heard from nobody for this long: lost
    o.heartbeat_ms = 100;
    auto center = tether::CenterService::start(Vec(4), o);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w)
        threads.emplace_back([&] {
            Vec x(4);
            auto worker = center->connect_worker({{x.data(), x.size()}});
            for (int s = 0; s < 6; ++s) {
                for (float& v : x) v += 0.01f;
                worker->step(kBatch);
            }
            // Gone without finish(): the process of a worker that crashed says nothing more.
        });
    for (auto& t : threads) t.join();
    // The center ends when no worker is left alive; wait() gives the same verdict as the summary.
    CHECK_THROWS_AS(center->wait(), tether::RunFailedError);
    const json summary = read_json(dir.file("lost") + "/summary.json");
    CHECK(summary["workers_lost"] == kWorkers);
    CHECK(summary["failed_workers"] == kWorkers);
    CHECK(summary["run_failed"] == true);
    CHECK(contains(summary["failure_reason"].get<std::string>(), "2 of 2 workers failed"));
}

TEST_CASE("servers = 2: one checkpoint per server, assembled by load_checkpoint, and the logs reach server 0") {
    TempDir dir;
    const std::string run = dir.file("two-servers");
    tether::ServiceOptions o = options_in(run);
    o.servers = 2;
    auto center = tether::CenterService::start(Vec(4, 0.f), o, Vec{1.f, 1.f});
    const tether::CenterSnapshot first = train(*center, 10);
    center.reset();
    CHECK_FALSE(std::filesystem::exists(run + "/checkpoint.bin"));
    CHECK(std::filesystem::exists(run + "/checkpoint-server-1.bin"));
    const tether::CenterSnapshot saved = tether::load_checkpoint(run);
    CHECK(saved.x == first.x);  // both servers' ranges, in order
    CHECK(saved.version == first.version);
    CHECK(saved.buffers == first.buffers);
    int logged = 0;
    for (const json& r : rows_of(run + "/metrics.jsonl")) logged += r.contains("worker") ? 1 : 0;
    CHECK(logged == kWorkers * 2);  // steps 0 and 5
    const json summary = read_json(run + "/summary.json");
    CHECK(summary["servers"] == 2);
    CHECK(summary["run_failed"] == false);
    // Resumed: every server from its own checkpoint.
    o.resume = true;
    auto resumed = tether::CenterService::start(Vec(4, 9.f), o, Vec{9.f, 9.f});
    CHECK(resumed->snapshot().x == first.x);
    CHECK(train(*resumed, 4).version > first.version);
}

TEST_CASE("overlap_steps: logs made while tether's thread holds the channel all arrive, in order") {
    TempDir dir;
    tether::ServiceOptions o = options_in(dir.file("overlap"));
    // Each exchange waits for its reply on tether's thread, holding the channel.
    o.strategy = R"({"name": "adag", "communication_window": 2, "overlap_steps": 2})";
    constexpr std::size_t kSize = 1 << 20;  // 4 MB each way: a reply takes long enough to log meanwhile
    auto center = tether::CenterService::start(Vec(kSize), o);
    constexpr int kSteps = 40;
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w)
        threads.emplace_back([&] {
            Vec x(kSize);
            auto worker = center->connect_worker({{x.data(), x.size()}});
            for (int s = 0; s < kSteps; ++s) {
                for (float& v : x) v += 0.01f;
                worker->step(kBatch);
                worker->log({{"step", double(s)}});  // every step: often while an exchange is in flight
            }
            worker->finish();
        });
    for (auto& t : threads) t.join();
    center->wait();
    std::vector<std::vector<double>> steps(kWorkers);
    for (const json& r : rows_of(dir.file("overlap") + "/metrics.jsonl"))
        if (r.contains("worker")) steps.at(r["worker"].get<std::size_t>()).push_back(r["step"].get<double>());
    for (const auto& logged : steps) {
        REQUIRE(logged.size() == std::size_t(kSteps));
        for (int s = 0; s < kSteps; ++s) CHECK(logged[std::size_t(s)] == s);
    }
}

TEST_CASE("checkpoint_seconds: a checkpoint is written while the workers train, not only at the end") {
    TempDir dir;
    const std::string run = dir.file("periodic");
    tether::ServiceOptions o = options_in(run);
    o.workers = 1;
    o.checkpoint_seconds = 1;
    auto center = tether::CenterService::start(Vec(4), o);
    Vec x(4);
    auto worker = center->connect_worker({{x.data(), x.size()}});
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!std::filesystem::exists(run + "/checkpoint.bin") && std::chrono::steady_clock::now() < until) {
        for (float& v : x) v += 0.01f;
        worker->step(kBatch);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(std::filesystem::exists(run + "/checkpoint.bin"));  // mid-run
    CHECK(tether::load_checkpoint(run).version > 0);
    worker->finish();
    CHECK(tether::load_checkpoint(run).version == center->wait_state().version);
}
