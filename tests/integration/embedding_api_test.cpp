// The embedding API for real training loops (include/tether/tether.hpp): a worker over several
// parameter tensors, a training loop that pauses longer than the center's worker timeout,
// snapshot() and stats_json() read while the center trains, and overlapped exchanges.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "transport/peer_identity.hpp"

namespace {

using nlohmann::json;
using tether::testing::contains;
using Vec = std::vector<float>;

// `workers` threads, each running body(w, center); returns the final x~.
template <typename Body>
Vec run_workers(tether::CenterService& center, int workers, Body body) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(static_cast<std::size_t>(workers));
    for (int w = 0; w < workers; ++w)
        threads.emplace_back([&, w] {
            try {
                body(w, center);
            } catch (const std::exception& e) {
                errors[std::size_t(w)] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
    return center.wait();
}

tether::ServiceOptions options_for(const std::string& strategy, int workers) {
    tether::ServiceOptions o;
    o.strategy = strategy;
    o.workers = workers;
    o.join_timeout_ms = 10000;
    return o;
}

}  // namespace

TEST_CASE("a worker over several tensors: the strategy sees them as one vector, in order") {
    // x~(0) = (0, 1, ..., 7) over tensors of 2, 5 and 1 elements. averaging with window 1:
    // each step worker w adds w + 1 to everything, the round's mean adds 1.5, so after 3
    // steps x~_j = j + 4.5 and every tensor holds its own slice of it.
    Vec initial(8);
    for (std::size_t j = 0; j < initial.size(); ++j) initial[j] = float(j);
    auto center = tether::CenterService::start(initial, options_for(R"({"name": "averaging", "communication_window": 1})", 2));
    std::vector<std::vector<Vec>> tensors(2, {Vec(2), Vec(5), Vec(1)});
    const Vec trained = run_workers(*center, 2, [&](int w, tether::CenterService& c) {
        auto& t = tensors[std::size_t(w)];
        auto worker = c.connect_worker({{t[0].data(), 2}, {t[1].data(), 5}, {t[2].data(), 1}});
        CHECK(t[1][0] == 2.f);  // joined: the tensors hold x~(0), slice by slice
        for (int s = 0; s < 3; ++s) {
            for (auto& tensor : t)
                for (float& v : tensor) v += float(w + 1);
            CHECK(worker->step(1));
        }
        worker->finish();
    });
    for (std::size_t j = 0; j < 8; ++j) CHECK(trained[j] == doctest::Approx(float(j) + 4.5f));
    for (const auto& t : tensors) {
        CHECK(t[0] == Vec{4.5f, 5.5f});
        CHECK(t[1] == Vec{6.5f, 7.5f, 8.5f, 9.5f, 10.5f});
        CHECK(t[2] == Vec{11.5f});
    }
}

TEST_CASE("parameter buffers that cannot work are refused before the worker joins, naming them") {
    auto center = tether::CenterService::start(Vec(6, 0.f), options_for(R"({"name": "aeasgd"})", 1));
    Vec a(6);
    auto refused = [&](std::vector<tether::ParameterSpan> parameters) {
        try {
            center->connect_worker(std::move(parameters));
        } catch (const tether::ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(contains(refused({{a.data(), 4}, {a.data() + 3, 3}}), "parameter buffers 0 and 1 overlap"));
    CHECK(contains(refused({{a.data(), 6}, {nullptr, 2}}), "parameter buffer 1: a null pointer"));
    CHECK(contains(refused({}), "none given"));
    // The sizes must add up to the center's: the center refuses the hello and says why.
    try {
        center->connect_worker({{a.data(), 2}, {a.data() + 2, 2}});
        FAIL("a worker of 4 parameters joined a center of 6");
    } catch (const std::runtime_error& e) {
        CHECK(contains(e.what(), "settings differ: model.parameters: center 6, worker 4"));
    }
    auto worker = center->connect_worker(a.data(), a.size());  // the refused ones took no place
    worker->step(1);  // one update reaches x~: a run that trained nothing fails its wait()
    worker->finish();
    center->wait();
}

TEST_CASE("a worker given no strategy takes the center's; a different one is refused naming the strategy first") {
    auto center = tether::CenterService::start(
        Vec(4, 0.f), [] {
            auto o = options_for(R"({"name": "adag", "communication_window": 2})", 1);
            o.address = "tcp://127.0.0.1:*";
            return o;
        }());
    Vec x(4);
    tether::ServiceOptions mine = options_for(R"({"name": "aeasgd"})", 1);
    CHECK_THROWS_WITH(tether::WorkerClient::connect(center->address(), mine, x.data(), x.size()),
                      doctest::Contains(R"(settings differ: strategy.name: center "adag", worker "aeasgd")"));
    mine.strategy = "";  // the center's: adag, window 2, 1 worker
    mine.workers = 0;
    auto worker = tether::WorkerClient::connect(center->address(), mine, x.data(), x.size());
    for (int s = 0; s < 4; ++s) {
        for (float& v : x) v += 1.f;
        CHECK(worker->step(1) == (s % 2 == 1));  // the center's window: every second step
    }
    worker->finish();
    // A finished worker is done: a step or a second goodbye says so instead of going nowhere.
    CHECK_THROWS_WITH(worker->step(1), doctest::Contains("has finished (finish() was called"));
    CHECK_THROWS_WITH(worker->finish(), doctest::Contains("has finished"));
    center->wait();
    CHECK(json::parse(center->stats_json())["workers_finished"] == 1);
}

TEST_CASE("a training loop that pauses longer than the worker timeout is not lost: tether heartbeats for it") {
    // Heartbeats go every 250 ms (a quarter of the timeout): a busy machine may delay a few.
    tether::ServiceOptions o = options_for(R"({"name": "downpour", "communication_window": 1})", 1);
    o.worker_timeout_ms = 1000;
    o.heartbeat_ms = 250;
    auto center = tether::CenterService::start(Vec(4, 0.f), o);
    run_workers(*center, 1, [&](int, tether::CenterService& c) {
        Vec x(4);
        auto worker = c.connect_worker(x.data(), x.size());
        for (int s = 0; s < 3; ++s) {
            for (float& v : x) v += 1.f;
            CHECK(worker->step(1));
            if (s < 2) std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // "validation": 2.5x the timeout
        }
        const tether::WorkerReport report = worker->finish();
        CHECK(report.exchanges == 3);
        CHECK(report.rejoins == 0);
    });
    const json stats = json::parse(center->stats_json());
    CAPTURE(stats.dump());
    CHECK(stats["workers_lost"] == 0);
    CHECK(stats["workers_finished"] == 1);
    CHECK(stats["updates_applied"] == 3);
    CHECK(center->snapshot().x == Vec(4, 3.f));
}

TEST_CASE("a worker whose parameters turn NaN stops naming the step before anything of it goes out") {
    // Nothing of a diverged update may reach x~: not through a lossy codec that would make the
    // NaN finite (int8's block scale ignores it, top-k leaves it out), not through the servers
    // of the ranges that are still finite.
    for (const int servers : {1, 2})
        for (const std::string codec : {"float32", "int8", "topk"}) {
            CAPTURE(servers);
            CAPTURE(codec);
            tether::ServiceOptions o = options_for(R"({"name": "downpour", "communication_window": 1})", 1);
            o.servers = servers;
            o.codec = codec;
            o.topk_ratio = 0.25;
            o.worker_timeout_ms = 600;  // the diverged worker never says bye: it is counted lost
            o.heartbeat_ms = 150;
            auto center = tether::CenterService::start(Vec(4, 0.f), o);
            Vec after_first;
            {
                Vec x(4);
                auto worker = center->connect_worker(x.data(), x.size());
                for (float& v : x) v += 1.f;
                CHECK(worker->step(1));
                after_first = center->snapshot().x;
                for (float& v : x) v += 1.f;
                x[3] = std::numeric_limits<float>::quiet_NaN();  // in the last server's range
                CHECK_THROWS_WITH(worker->step(1),
                                  doctest::Contains("diverged at step 2 (non-finite parameters at exchange 2)"));
            }
            // Its only worker was lost: the run failed, and wait() says so; x~ is still there.
            CHECK_THROWS_AS(center->wait(), tether::RunFailedError);
            CHECK(center->snapshot().x == after_first);
            const json stats = json::parse(center->stats_json());
            CAPTURE(stats.dump());
            CHECK(stats["rejected_messages"] == 0);
        }
}

TEST_CASE("snapshot() and stats_json() read a consistent x~ while 4 workers train") {
    // downpour, window 1, every step adds exactly 1 to every element: each update adds 1 to x~,
    // so a snapshot taken between two updates has x~_j = j + version for every j. A torn read
    // (x~ half updated, or a version from another instant) breaks that.
    constexpr int kWorkers = 4, kSteps = 150;
    Vec initial(1000);
    for (std::size_t j = 0; j < initial.size(); ++j) initial[j] = float(j);
    auto center = tether::CenterService::start(initial, options_for(R"({"name": "downpour", "communication_window": 1})", kWorkers));
    std::atomic<bool> training{true};
    std::atomic<int> snapshots{0}, torn{0}, backwards{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r)
        readers.emplace_back([&] {
            std::uint64_t last_version = 0, last_updates = 0;
            while (training) {
                const tether::CenterSnapshot s = center->snapshot();
                for (std::size_t j = 0; j < s.x.size(); ++j)
                    if (s.x[j] != float(j) + float(s.version)) {
                        ++torn;
                        break;
                    }
                const auto updates = json::parse(center->stats_json())["updates_applied"].get<std::uint64_t>();
                if (s.version < last_version || updates < last_updates) ++backwards;
                last_version = s.version;
                last_updates = updates;
                ++snapshots;
            }
        });
    run_workers(*center, kWorkers, [&](int w, tether::CenterService& c) {
        Vec x(initial.size());
        auto worker = c.connect_worker(x.data(), x.size());
        for (int s = 0; s < kSteps; ++s) {
            for (float& v : x) v += 1.f;
            worker->step(1);
            // Worker 0 waits until the readers have read a few times while the others train on,
            // so that the reads overlap training even on a loaded machine.
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (w == 0 && s == 10 && snapshots < 20 && std::chrono::steady_clock::now() < deadline)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        worker->finish();
    });
    training = false;
    for (auto& t : readers) t.join();
    CHECK(snapshots >= 20);
    CHECK(torn == 0);
    CHECK(backwards == 0);
    const tether::CenterSnapshot final_state = center->snapshot();
    CHECK(final_state.version == std::uint64_t(kWorkers) * kSteps);
    CHECK(final_state.x[7] == 7.f + float(kWorkers * kSteps));
}

TEST_CASE("overlapped exchanges keep every local step, one window late") {
    // downpour: every update is exactly the worker's local steps since its last snapshot, so
    // with overlap, too, x~ ends at x~(0) + every step of every worker.
    // 7 steps: with window 2, 3 overlapped exchanges and the 7th step's at finish(); with
    // window 1, 7 overlapped exchanges and nothing left.
    // Window 3 with replies a step late: exchanges after steps 3 and 6, and the 7th at finish().
    const std::vector<std::pair<std::string, std::size_t>> cases = {
        {R"({"name": "downpour", "communication_window": 2, "overlap_steps": 2})", 4},
        {R"({"name": "adag", "communication_window": 1, "overlap_steps": 1})", 7},
        {R"({"name": "downpour", "communication_window": 3, "overlap_steps": 1})", 3}};
    for (const auto& [strategy, exchanges] : cases) {
        CAPTURE(strategy);
        tether::ServiceOptions o = options_for(strategy, 3);
        auto center = tether::CenterService::start(Vec(5, 0.f), o);
        const Vec trained = run_workers(*center, 3, [&](int, tether::CenterService& c) {
            Vec a(2), b(3);
            auto worker = c.connect_worker({{a.data(), 2}, {b.data(), 3}});
            for (int s = 0; s < 7; ++s) {
                for (float& v : a) v += 1.f;
                for (float& v : b) v += 1.f;
                worker->step(1);
            }
            const tether::WorkerReport report = worker->finish();
            CHECK(report.steps == 7);
            CHECK(report.exchanges == exchanges);
        });
        // adag divides each update by its window (1): the same sum.
        CHECK(trained == Vec(5, 21.f));
    }
}

TEST_CASE("worker identities name the host, so workers on two hosts never collide") {
    char host[65] = {};
    REQUIRE(::gethostname(host, sizeof host - 1) == 0);
    const std::string a = tether::unique_peer_identity("api-worker"), b = tether::unique_peer_identity("api-worker");
    CHECK(a.rfind(std::string("api-worker-") + host + "-" + std::to_string(::getpid()) + "-", 0) == 0);
    CHECK(a != b);
}
