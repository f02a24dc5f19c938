// Work that is leased, not owned (cluster.leases, ServiceOptions::leases): each worker asks the
// center for its next block of positions (WorkerClient::lease) and trains it. What a user
// relies on: every position of the run is trained once, by whichever worker is free (a fast one
// takes more; none idles while work is left); a lost worker's untrained block is trained by
// another; a worker that joins mid-run is given work at once.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using Vec = std::vector<float>;

constexpr int kWindow = 4;
constexpr std::uint64_t kBatch = 8;
constexpr std::uint64_t kLease = kWindow * kBatch;
constexpr std::uint64_t kTotal = 2400;

tether::ServiceOptions leased(const std::string& strategy, int workers) {
    tether::ServiceOptions o;
    o.strategy = R"({"name": ")" + strategy + R"(", "communication_window": )" + std::to_string(kWindow) + "}";
    o.workers = workers;
    o.join_timeout_ms = 10000;
    return o;
}

// Trains one lease batch by batch (a step each), recording its positions; false when no work is left.
bool train_lease(tether::WorkerClient& worker, Vec& x, std::vector<std::uint64_t>& trained, int delay_ms = 0) {
    const tether::Lease lease = worker.lease(kLease, kTotal);
    if (lease.count == 0) return false;
    for (std::uint64_t first = 0; first < lease.count; first += kBatch) {
        const std::uint64_t rows = std::min(kBatch, lease.count - first);
        if (first + rows >= lease.count) worker.ask_lease(kLease, kTotal);  // its last step: the next travels meanwhile
        for (float& v : x) v += 0.001f;
        if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        for (std::uint64_t q = lease.start + first; q < lease.start + first + rows; ++q) trained.push_back(q);
        worker.step(rows);
    }
    return true;
}

// Every position of the run trained exactly once, over all the workers' lists.
void check_each_position_once(const std::vector<std::vector<std::uint64_t>>& trained) {
    std::vector<int> seen(kTotal, 0);
    for (const auto& list : trained)
        for (std::uint64_t q : list) {
            REQUIRE(q < kTotal);
            ++seen[q];
        }
    for (std::uint64_t q = 0; q < kTotal; ++q) REQUIRE_MESSAGE(seen[q] == 1, "position ", q, " trained ", seen[q], " times");
}

nlohmann::json stats_of(tether::CenterService& center) { return nlohmann::json::parse(center.stats_json()); }

}  // namespace

TEST_CASE("leases: every position is trained once, and the fast worker trains more of them") {
    for (const std::string name : {"adag", "async-diloco", "averaging"}) {
        CAPTURE(name);
        auto center = tether::CenterService::start(Vec(16, 0.f), leased(name, 2));
        std::vector<std::vector<std::uint64_t>> trained(2);
        std::vector<std::string> errors(2);
        std::vector<std::thread> threads;
        for (int w = 0; w < 2; ++w)
            threads.emplace_back([&, w] {
                try {
                    Vec x(16);
                    auto worker = center->connect_worker(x.data(), x.size());
                    while (train_lease(*worker, x, trained[std::size_t(w)], w == 1 ? 2 : 0)) {
                    }
                    worker->finish();
                } catch (const std::exception& e) {
                    errors[std::size_t(w)] = e.what();
                }
            });
        for (auto& t : threads) t.join();
        for (const auto& e : errors) CHECK_MESSAGE(e.empty(), e);
        center->wait();
        check_each_position_once(trained);
        if (name == "averaging") {
            // A round waits for both, so both train alike until the work runs out; the one that
            // finds none left leaves, and the other's rounds go on without it.
            CHECK(trained[0].size() + trained[1].size() == kTotal);
        } else {
            // Without a round, the worker that does not sleep takes the larger part by far.
            CHECK_MESSAGE(trained[0].size() > 2 * trained[1].size(), trained[0].size(), " against ", trained[1].size());
        }
        const nlohmann::json stats = stats_of(*center);
        CHECK(stats.at("worker_idle_seconds").size() == 2);  // each worker's wait at the end, by id
        const nlohmann::json leases = stats.at("leases");
        CHECK(leases.at("granted").get<std::uint64_t>() == kTotal);
        CHECK(leases.at("positions").get<std::uint64_t>() == kTotal);
    }
}

TEST_CASE("leases: what a lost worker leased and had not exchanged is trained by another") {
    tether::ServiceOptions o = leased("adag", 2);
    o.worker_timeout_ms = 300;
    o.heartbeat_ms = 50;
    auto center = tether::CenterService::start(Vec(16, 0.f), o);
    std::vector<std::vector<std::uint64_t>> trained(2);
    std::vector<std::uint64_t> lost_lease;  // the block the lost worker held when it went silent
    std::thread lost([&] {
        Vec x(16);
        auto worker = center->connect_worker(x.data(), x.size());
        for (int i = 0; i < 2; ++i) REQUIRE(train_lease(*worker, x, trained[1]));  // two windows, exchanged
        const tether::Lease held = worker->lease(kLease, kTotal);
        REQUIRE(held.count == kLease);
        for (std::uint64_t q = held.start; q < held.start + held.count; ++q) lost_lease.push_back(q);
        worker->step(kBatch);  // half a window trained, never exchanged: then the worker dies
        worker->step(kBatch);
        // Destroyed without finish(): no bye, as a killed process; the center counts it lost.
    });
    Vec x(16);
    auto worker = center->connect_worker(x.data(), x.size());
    lost.join();
    for (int i = 0; i < 3; ++i) REQUIRE(train_lease(*worker, x, trained[0]));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (stats_of(*center).at("workers_lost").get<int>() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(stats_of(*center).at("workers_lost").get<int>() == 1);
    while (train_lease(*worker, x, trained[0])) {
    }
    worker->finish();
    center->wait();
    // The lost worker's exchanged windows count; its last block is the survivor's.
    check_each_position_once(trained);
    const std::set<std::uint64_t> survivor(trained[0].begin(), trained[0].end());
    for (std::uint64_t q : lost_lease) REQUIRE(survivor.count(q) == 1);
    const nlohmann::json leases = stats_of(*center).at("leases");
    CHECK(leases.at("returned_positions").get<std::uint64_t>() == kLease);
    CHECK(leases.at("served_again").get<std::uint64_t>() == kLease);
}

TEST_CASE("leases: a worker that joins mid-run is given work at once and shares the rest") {
    tether::ServiceOptions o = leased("adag", 1);
    o.elastic = true;
    auto center = tether::CenterService::start(Vec(16, 0.f), o);
    std::vector<std::vector<std::uint64_t>> trained(2);
    Vec x(16), y(16);
    auto first = center->connect_worker(x.data(), x.size());
    while (trained[0].size() < kTotal / 2) REQUIRE(train_lease(*first, x, trained[0]));
    std::thread joiner([&] {
        auto second = center->connect_worker(y.data(), y.size());
        const tether::Lease lease = second->lease(kLease, kTotal);
        CHECK(lease.count == kLease);  // work at once: half the run is still to come
        for (std::uint64_t q = lease.start; q < lease.start + lease.count; ++q) trained[1].push_back(q);
        second->step(lease.count);
        while (train_lease(*second, y, trained[1], 1)) {
        }
        second->finish();
    });
    while (train_lease(*first, x, trained[0], 1)) {
    }
    joiner.join();
    first->finish();
    center->wait();
    check_each_position_once(trained);
    CHECK(trained[1].size() >= kTotal / 8);
}

TEST_CASE("leases with a budget: the budget's positions, each once, and then no more work") {
    tether::ServiceOptions o = leased("adag", 2);
    o.budget_samples = 1000;
    auto center = tether::CenterService::start(Vec(16, 0.f), o);
    std::vector<std::vector<std::uint64_t>> trained(2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w)
        threads.emplace_back([&, w] {
            Vec x(16);
            auto worker = center->connect_worker(x.data(), x.size());
            while (worker->running()) {
                const tether::Lease lease = worker->lease(kLease);  // no total: the budget bounds the stream
                if (lease.count == 0) break;
                for (std::uint64_t q = lease.start; q < lease.start + lease.count; ++q) trained[std::size_t(w)].push_back(q);
                worker->step(lease.count);
            }
            worker->finish();
        });
    for (auto& t : threads) t.join();
    center->wait();
    std::set<std::uint64_t> all;
    for (const auto& list : trained) all.insert(list.begin(), list.end());
    CHECK(trained[0].size() + trained[1].size() == 1000);
    CHECK(all.size() == 1000);
    CHECK(*all.rbegin() == 999);
}
