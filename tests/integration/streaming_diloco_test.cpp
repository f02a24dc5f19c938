// Streaming DiLoCo (strategy.fragments, strategy.overlap_steps; <tether/strategy.hpp>) through
// the embedding API, checked in closed form: with outer learning rate 1 and no momentum each
// server's round is the mean of its fragment, and worker w adds c_w = w + 1 to every element
// each step, so every value after every step is known.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

using Vec = std::vector<float>;
using Trace = std::vector<Vec>;  // x after each step

struct Run {
    std::vector<Trace> traces;  // by worker
    std::vector<std::vector<bool>> changed;  // by worker: what step() returned
    std::vector<tether::WorkerReport> reports;
    Vec final_x;
    nlohmann::json stats;
};

// 2 workers, 6 parameters, `steps` local steps each. Unless the replies are mixed in, each
// worker ends at x~, the mean of the steps (1.5 a step).
Run run(const std::string& strategy, int servers, std::vector<int> steps, bool mixed = false) {
    tether::ServiceOptions o;
    o.strategy = strategy;
    o.workers = 2;
    o.servers = servers;
    o.join_timeout_ms = 10000;
    auto center = tether::CenterService::start(Vec(6, 0.f), o);
    Run r;
    r.traces.resize(2);
    r.changed.resize(2);
    r.reports.resize(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w)
        threads.emplace_back([&, w] {
            try {
                Vec x(6);
                auto worker = center->connect_worker(x.data(), x.size());
                for (int s = 0; s < steps[std::size_t(w)]; ++s) {
                    for (float& v : x) v += float(w + 1);
                    r.changed[std::size_t(w)].push_back(worker->step(1));
                    r.traces[std::size_t(w)].push_back(x);
                }
                r.reports[std::size_t(w)] = worker->finish();
                if (!mixed && steps[0] == steps[1]) CHECK(x == Vec(6, 1.5f * float(steps[0])));  // the last replies landed
            } catch (const std::exception& e) {
                errors[std::size_t(w)] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
    r.final_x = center->wait();
    r.stats = nlohmann::json::parse(center->stats_json());
    return r;
}
Run run(const std::string& strategy, int servers, int steps, bool mixed = false) {
    return run(strategy, servers, std::vector<int>{steps, steps}, mixed);
}

// Fragment 0 is x[0, 3), fragment 1 x[3, 6) (two servers' ranges).
Vec halves(float a, float b) { return {a, a, a, b, b, b}; }

const char* kOuter = R"("outer_learning_rate": 1.0, "outer_momentum": 0.0)";

}  // namespace

TEST_CASE("two fragments, H = 4: fragment 1 after steps 2 and 6, fragment 0 after step 4, the rest at finish") {
    const Run r = run(std::string(R"({"name": "diloco", "communication_window": 4, "fragments": 2, )") + kOuter + "}", 2, 6);
    for (int w = 0; w < 2; ++w) {
        CAPTURE(w);
        const float c = float(w + 1);  // the mean of c_w is 1.5
        const Trace expected = {halves(c, c),
                                halves(2 * c, 3),            // fragment 1: the mean of 2 c_w
                                halves(3 * c, 3 + c),
                                halves(6, 3 + 2 * c),        // fragment 0: the mean of 4 c_w
                                halves(6 + c, 3 + 3 * c),
                                halves(6 + 2 * c, 9)};       // fragment 1: the mean of 3 + 4 c_w
        CHECK(r.traces[std::size_t(w)] == expected);
        CHECK(r.changed[std::size_t(w)] == std::vector<bool>{false, true, false, true, false, true});
        // 3 on schedule, and fragment 0 at finish (fragment 1 had not changed since step 6).
        CHECK(r.reports[std::size_t(w)].exchanges == 4);
    }
    CHECK(r.final_x == Vec(6, 9.f));
    CHECK(r.stats["workers_finished"] == 2);
    // Each exchange reached one server: the center counts all 8 (4 rounds of 2), not server 0's.
    CHECK(r.stats["exchanges"] == 8);
    CHECK(r.stats["rounds"] == 4);
    CHECK(r.stats["updates_applied"] == 4);
}

TEST_CASE("overlap_steps 1: each fragment's reply lands one step later, the step in between kept") {
    const Run r = run(std::string(R"({"name": "diloco", "communication_window": 4, "fragments": 2, "overlap_steps": 1, )") +
                          kOuter + "}",
                      2, 6);
    for (int w = 0; w < 2; ++w) {
        CAPTURE(w);
        const float c = float(w + 1);
        const Trace expected = {halves(c, c),
                                halves(2 * c, 2 * c),        // fragment 1 sent (2 c_w), not landed yet
                                halves(3 * c, 3 + c),        // landed: 3 + the step since
                                halves(4 * c, 3 + 2 * c),    // fragment 0 sent
                                halves(6 + c, 3 + 3 * c),    // landed: 6 + the step since
                                halves(6 + 2 * c, 3 + 4 * c)};  // fragment 1 sent; lands at finish
        CHECK(r.traces[std::size_t(w)] == expected);
        // step() says when x may have changed: a fragment went out (2, 4, 6) or landed (3, 5),
        // which is when a replica group must broadcast.
        CHECK(r.changed[std::size_t(w)] == std::vector<bool>{false, true, true, true, true, true});
        CHECK(r.reports[std::size_t(w)].exchanges == 4);
    }
    CHECK(r.final_x == Vec(6, 9.f));
}

TEST_CASE("mixing 0.5: a late reply is averaged with the worker's fragment, as the paper merges it") {
    const Run r = run(std::string(R"({"name": "diloco", "communication_window": 4, "fragments": 2, "overlap_steps": 1, )"
                                  R"("mixing": 0.5, )") + kOuter + "}",
                      2, 6, true);
    for (int w = 0; w < 2; ++w) {
        CAPTURE(w);
        const float c = float(w + 1);
        const Trace expected = {halves(c, c),
                                halves(2 * c, 2 * c),                        // fragment 1 sent (2 c_w)
                                halves(3 * c, 1.5f * c + 1.5f),              // 0.5 * 3 c_w + 0.5 * 3
                                halves(4 * c, 2.5f * c + 1.5f),              // fragment 0 sent (4 c_w)
                                halves(2.5f * c + 3, 3.5f * c + 1.5f),       // 0.5 * 5 c_w + 0.5 * 6
                                halves(3.5f * c + 3, 4.5f * c + 1.5f)};      // fragment 1 sent
        CHECK(r.traces[std::size_t(w)] == expected);
    }
    // finish(): fragment 1's reply lands and fragment 0 goes out once more; x~ is each
    // fragment's last mean: 4.5 * 1.5 + 1.5 and 3.5 * 1.5 + 3, both 8.25.
    CHECK(r.final_x == Vec(6, 8.25f));
}

TEST_CASE("one fragment with overlap_steps 2 < H: the whole reply lands 2 steps after the exchange went out") {
    const Run r = run(std::string(R"({"name": "diloco", "communication_window": 4, "overlap_steps": 2, )") + kOuter + "}", 1, 6);
    for (int w = 0; w < 2; ++w) {
        CAPTURE(w);
        const float c = float(w + 1);
        const Trace& t = r.traces[std::size_t(w)];
        CHECK(t[3] == Vec(6, 4 * c));      // step 4: x goes out
        CHECK(t[4] == Vec(6, 5 * c));      // still training on
        CHECK(t[5] == Vec(6, 6 + 2 * c));  // step 6: the mean of 4 c_w, plus the 2 steps since
        CHECK(r.changed[std::size_t(w)] == std::vector<bool>{false, false, false, true, false, true});
        CHECK(r.reports[std::size_t(w)].exchanges == 2);  // step 4's, and finish's
    }
    CHECK(r.final_x == Vec(6, 9.f));
}

TEST_CASE("each fragment once per window: 8 steps are 2 plain exchanges, or 4 fragments' and one at finish") {
    const std::string plain = std::string(R"({"name": "diloco", "communication_window": 4, )") + kOuter + "}";
    const std::string streaming = std::string(R"({"name": "diloco", "communication_window": 4, "fragments": 2, )") + kOuter + "}";
    // Plain DiLoCo exchanges after steps 4 and 8; the fragments after 2, 4, 6, 8 and fragment 1
    // once more at finish (changed since step 6). Either way x~ ends at the workers' mean.
    const Run a = run(plain, 2, 8), b = run(streaming, 2, 8);
    CHECK(a.final_x == Vec(6, 12.f));
    CHECK(b.final_x == Vec(6, 12.f));
    CHECK(a.reports[0].exchanges == 2);
    CHECK(b.reports[0].exchanges == 5);
}

TEST_CASE("workers that end at different steps finish at once: finish() sends its changed fragments together") {
    // Worker 0 stops after 5 steps with both fragments changed; worker 1's step 6 sends fragment
    // 1 and waits for that round. Sent one server after the other, worker 0's fragment 0 would
    // wait for worker 1's, which comes only after its own round on server 1 closed: both would
    // sit until a worker counted lost (cluster.worker_timeout_ms, 10 s). Sent together, each
    // round has both: x~ = the means, 8.5 (worker 0's 7 and 6, worker 1's 10 and 11).
    const auto started = std::chrono::steady_clock::now();
    const Run r = run(std::string(R"({"name": "diloco", "communication_window": 4, "fragments": 2, )") + kOuter + "}", 2,
                      std::vector<int>{5, 6});
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    CHECK(r.stats["workers_finished"] == 2);
    CHECK(r.stats["workers_lost"] == 0);
    CHECK(r.final_x == Vec(6, 8.5f));
    CHECK(r.reports[0].exchanges == 4);  // fragments 1 and 0 on schedule, both at finish
    CHECK(r.reports[1].exchanges == 4);  // 1, 0, 1 on schedule, fragment 0 at finish
}

TEST_CASE("streaming settings that cannot work are refused, naming the keys and what would") {
    tether::ServiceOptions o;
    o.workers = 2;
    o.strategy = R"({"name": "diloco", "communication_window": 4, "fragments": 2})";
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(6, 0.f), o),
                         doctest::Contains("ServiceOptions.strategy.fragments: 2 fragments, but ServiceOptions.servers is 1"),
                         tether::ConfigError);
    o.servers = 2;
    o.strategy = R"({"name": "diloco", "communication_window": 4, "fragments": 5})";
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(6, 0.f), o),
                         doctest::Contains("fragments: 5 fragments with ServiceOptions.strategy.communication_window 4"),
                         tether::ConfigError);
    o.strategy = R"({"name": "diloco", "communication_window": 4, "fragments": 2, "overlap_steps": 3})";
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(6, 0.f), o),
                         doctest::Contains("ServiceOptions.strategy.overlap_steps: 3; a reply must land before the next exchange "
                                           "goes out, 2 steps later: at most 2"),
                         tether::ConfigError);
    o.strategy = R"({"name": "diloco", "communication_window": 4, "mixing": 0.5})";  // 1 fragment, 2 servers
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(6, 0.f), o),
                         doctest::Contains("ServiceOptions.strategy.mixing: set with 1 fragment and ServiceOptions.servers 2; mixing merges "
                                          "fragment by fragment, one server each: set ServiceOptions.strategy.fragments to 2"),
                         tether::ConfigError);
    o.strategy = R"({"name": "diloco", "communication_window": 4, "mixing": 1.0})";
    CHECK_THROWS_WITH_AS(tether::CenterService::start(Vec(6, 0.f), o), doctest::Contains("ServiceOptions.strategy.mixing"),
                         tether::ConfigError);
}
