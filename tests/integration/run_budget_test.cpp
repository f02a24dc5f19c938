// A run budget the center owns (cluster.budget_samples, ServiceOptions::budget_samples): the
// workers train in a loop on WorkerClient::running() until a reply says the budget is trained,
// for every kind of strategy (synchronous rounds, asynchronous, DiLoCo, asynchronous DiLoCo).
// What a user relies on: the run ends within about one window per worker of the budget, and a
// fast worker does not idle while a slow one trains its fixed share: it takes more of the budget.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

using Vec = std::vector<float>;

constexpr int kWindow = 4;
constexpr std::size_t kBatch = 8;
constexpr std::int64_t kBudget = 4000;

struct Shares {
    std::vector<std::uint64_t> samples;  // by worker id, as the center counted them
    std::vector<std::uint64_t> reported;  // by worker, as finish() reported them
};

// Two workers, the second `slow_ms` slower per step, each training until running() is false.
Shares run_with_budget(const std::string& strategy, int slow_ms, int servers = 1) {
    tether::ServiceOptions o;
    o.strategy = strategy;
    o.workers = 2;
    o.servers = servers;
    o.join_timeout_ms = 10000;
    o.budget_samples = kBudget;
    auto center = tether::CenterService::start(Vec(16, 0.f), o);
    Shares out{{}, std::vector<std::uint64_t>(2)};
    std::vector<std::thread> threads;
    std::vector<std::string> errors(2);
    for (int w = 0; w < 2; ++w)
        threads.emplace_back([&, w] {
            try {
                Vec x(16);
                auto worker = center->connect_worker(x.data(), x.size());
                while (worker->running()) {
                    for (float& v : x) v += 0.001f;
                    if (w == 1) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
                    worker->step(kBatch);
                }
                out.reported[std::size_t(w)] = worker->finish().samples;
                CHECK_FALSE(worker->running());
            } catch (const std::exception& e) {
                errors[std::size_t(w)] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
    center->wait();
    const nlohmann::json stats = nlohmann::json::parse(center->stats_json());
    for (const auto& [id, samples] : stats.at("worker_samples").items()) out.samples.push_back(samples.get<std::uint64_t>());
    return out;
}

}  // namespace

TEST_CASE("the budget ends the run within a window per worker, and the fast worker takes more of it") {
    for (const std::string name : {"averaging", "adag", "diloco", "async-diloco"}) {
        CAPTURE(name);
        const std::string strategy = R"({"name": ")" + name + R"(", "communication_window": )" + std::to_string(kWindow) + "}";
        const Shares s = run_with_budget(strategy, 2);
        REQUIRE(s.samples.size() == 2);
        const std::uint64_t total = s.samples[0] + s.samples[1];
        CHECK(total >= std::uint64_t(kBudget));
        // Each worker learns of the budget with its next reply: at most one window past it each.
        CHECK(total <= std::uint64_t(kBudget) + 2 * kWindow * kBatch);
        CHECK(s.reported[0] + s.reported[1] == total);
        if (name == "averaging" || name == "diloco") {
            // A round waits for both: their shares stay equal, the budget still ends it.
            CHECK(s.reported[0] == s.reported[1]);
        } else {
            // Asynchronous: the fast worker (no sleep) trains on while the slow one sleeps 2 ms a
            // step. By thread: the center's ids follow the order in which they joined.
            CHECK_MESSAGE(s.reported[0] > 2 * s.reported[1], s.reported[0], " against ", s.reported[1]);
        }
    }
}

TEST_CASE("streaming DiLoCo's fragments, each on a server of its own, end at the budget too") {
    const std::string strategy = R"({"name": "diloco", "communication_window": 4, "fragments": 2, "overlap_steps": 1})";
    const Shares s = run_with_budget(strategy, 2, 2);
    const std::uint64_t total = s.reported[0] + s.reported[1];
    CHECK(total >= std::uint64_t(kBudget));
    CHECK(total <= std::uint64_t(kBudget) + 2 * kWindow * kBatch);
    CHECK(s.reported[0] == s.reported[1]);  // its rounds wait for both, as a round does
}

TEST_CASE("without a budget a worker runs until finish()") {
    tether::ServiceOptions o;
    o.strategy = R"({"name": "adag", "communication_window": 2})";
    o.workers = 1;
    auto center = tether::CenterService::start(Vec(4, 0.f), o);
    Vec x(4);
    auto worker = center->connect_worker(x.data(), x.size());
    for (int s = 0; s < 10; ++s) {
        CHECK(worker->running());
        worker->step(kBatch);
    }
    worker->finish();
    CHECK_FALSE(worker->running());
    center->wait();
}

TEST_CASE("a run that stops short of its budget fails, naming both figures") {
    tether::ServiceOptions o;
    o.strategy = R"({"name": "adag", "communication_window": 2})";
    o.workers = 1;
    o.budget_samples = kBudget;
    auto center = tether::CenterService::start(Vec(4, 0.f), o);
    Vec x(4);
    auto worker = center->connect_worker(x.data(), x.size());
    for (int s = 0; s < 10; ++s) worker->step(kBatch);  // 80 of 4000 samples, then the loop ends early
    worker->finish();
    try {
        center->wait();
        FAIL("wait() accepted a run that trained 80 of its 4000 samples");
    } catch (const tether::RunFailedError& e) {
        const std::string what = e.what();
        CHECK_MESSAGE(what.find("80 of 4000") != std::string::npos, what);
    }
}
