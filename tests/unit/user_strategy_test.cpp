// A strategy written against <tether/strategy.hpp> alone (tests/packaging/damped_sum_strategy.hpp,
// which the out-of-tree consumer builds too), registered by name, then used the two ways a
// built-in is: from ServiceOptions.strategy in the embedding API, and from a config file's
// `strategy` block in a whole embedded run. Registration refuses names it cannot take.
#include <doctest/doctest.h>

#include <tether/strategy.hpp>
#include <tether/tether.hpp>

#include "packaging/damped_sum_strategy.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "config_support.hpp"
#include "run/run.hpp"
#include "test_support.hpp"

namespace {

using nlohmann::json;
using tether::testing::contains;

void register_once() {
    static std::once_flag once;
    std::call_once(once, damped_sum::register_it);
}

// Worker w adds w + 1 to every element before each of its `steps` steps, then finishes.
std::vector<float> train_two_workers(const std::string& strategy, int steps, std::string* stats = nullptr) {
    tether::ServiceOptions options;
    options.strategy = strategy;
    options.workers = 2;
    auto center = tether::CenterService::start(std::vector<float>(3, 1.f), options);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w)
        threads.emplace_back([&, w] {
            std::vector<float> x(3);
            auto worker = center->connect_worker(x.data(), x.size());
            for (int s = 0; s < steps; ++s) {
                for (float& v : x) v += float(w + 1);
                worker->step(1);
            }
            worker->finish();
        });
    for (auto& t : threads) t.join();
    std::vector<float> x = center->wait();
    if (stats) *stats = center->stats_json();
    return x;
}

// A strategy of one's own with an exchange policy of its own: damped-sum's rules, exchanging
// after the steps 1, 3, 6, 10, ... (each window one step longer than the last, set by the
// policy itself through set_window).
class GrowingWindow final : public tether::ExchangePolicy {
public:
    std::optional<std::size_t> due(std::size_t) override {
        if (++since_ < std::size_t(window_)) return std::nullopt;
        since_ = 0;
        set_window(window_ + 1);
        return 0;
    }
    int window() const override { return window_; }
    void set_window(int steps) override { window_ = steps; }

private:
    int window_ = 1;
    std::size_t since_ = 0;
};

class GrowingSum final : public tether::Strategy {
public:
    int communication_window() const override { return 1; }
    std::unique_ptr<tether::WorkerRule> make_worker_rule(const tether::StrategyContext& c) const override {
        return std::make_unique<damped_sum::Worker>(c.num_parameters);
    }
    std::unique_ptr<tether::CenterRule> make_center_rule(const tether::StrategyContext&) const override {
        return tether::center_rule<damped_sum::Center>(1.f);
    }
    std::unique_ptr<tether::ExchangePolicy> make_exchange_policy(const tether::StrategyContext&) const override {
        return std::make_unique<GrowingWindow>();
    }
};

}  // namespace

TEST_CASE("a strategy of one's own brings its own exchange policy: the worker exchanges when it says") {
    static std::once_flag once;
    std::call_once(once, [] {
        tether::register_strategy("growing-sum", "damped-sum at scale 1, windows 1, 2, 3, ...",
                                  [](tether::StrategyOptions&, const tether::StrategyContext&) {
                                      return std::make_shared<GrowingSum>();
                                  });
    });
    // 10 steps a worker: exchanges after steps 1, 3, 6 and 10, none left for finish(). Every step
    // reaches x~ once: 1 + 10 * 1 + 10 * 2.
    std::string stats;
    for (float v : train_two_workers(R"({"name": "growing-sum"})", 10, &stats)) CHECK(v == doctest::Approx(31));
    CHECK(json::parse(stats)["updates_applied"] == 8);
    // 11 steps: the 11th goes out at finish().
    for (float v : train_two_workers(R"({"name": "growing-sum"})", 11, &stats)) CHECK(v == doctest::Approx(34));
    CHECK(json::parse(stats)["updates_applied"] == 10);
}

TEST_CASE("a registered strategy works from ServiceOptions.strategy, with its own options") {
    register_once();
    const auto names = tether::strategy_names();
    CHECK(std::find(names.begin(), names.end(), "damped-sum") != names.end());
    // scale 0.25: x~ = 1 + 0.25 * (3 steps * 1 + 3 steps * 2), whatever the order of commits.
    std::string stats;
    for (float v : train_two_workers(R"({"name": "damped-sum", "scale": 0.25})", 3, &stats))
        CHECK(v == doctest::Approx(1 + 0.25 * 9));
    CHECK(json::parse(stats)["updates_applied"] == 6);
    // The default scale is 1 / workers, resolved by the strategy itself.
    for (float v : train_two_workers(R"({"name": "damped-sum", "communication_window": 3})", 3))
        CHECK(v == doctest::Approx(1 + 0.5 * 9));
    try {
        train_two_workers(R"({"name": "damped-sum", "scale": 2})", 1);
        FAIL("scale 2 accepted");
    } catch (const tether::ConfigError& e) {
        CHECK(contains(e.what(), "ServiceOptions.strategy.scale"));
        CHECK(contains(e.what(), "<= 1"));
    }
}

TEST_CASE("a registered strategy works from a config file, in a whole embedded run") {
    register_once();
    const json strategy = {{"name", "damped-sum"}, {"communication_window", 4}};
    const tether::RunConfig parsed = tether::parse_config({{"strategy", strategy}, {"cluster", {{"workers", 4}}}});
    CHECK(parsed.cluster.strategy->name() == "damped-sum");
    CHECK(parsed.cluster.strategy->describe()["scale"].get<double>() == doctest::Approx(0.25));
    CHECK(parsed.cluster.strategy->communication_window() == 4);
    CHECK(contains(tether::testing::parse_error({{"strategy", {{"name", "damped-sum"}, {"scael", 1}}}}),
                   "strategy.scael: unknown key; did you mean strategy.scale?"));
    // It does not say what its vectors are (Strategy::wire_kinds): float32 only.
    CHECK(contains(tether::testing::parse_error({{"strategy", strategy}, {"cluster", {{"codec", "int8"}}}}),
                   "cluster.codec: \"int8\" compresses the workers' exchanges, but strategy \"damped-sum\" does not say"));
    CHECK(contains(tether::testing::parse_error({{"strategy", strategy}, {"cluster", {{"reply_codec", "topk"}}}}),
                   "cluster.reply_codec: \"topk\" compresses the center's replies"));

    json document = json::parse(R"({
        "name": "user-strategy",
        "data": {"source": "synthetic", "train_samples": 1200, "test_samples": 300,
                 "features": 8, "classes": 3, "noise": 1.0},
        "model": {"hidden_layers": [16]},
        "training": {"epochs": 6, "batch_size": 16, "device": "cpu", "threads": 1, "seed": 2,
                     "optimizer": {"name": "adam", "learning_rate": 0.01}},
        "cluster": {"mode": "embedded", "workers": 2, "worker_timeout_ms": 1500, "heartbeat_ms": 200}
    })");
    document["strategy"] = strategy;
    tether::testing::TempDir dir;
    const json summary = tether::run_experiment(tether::parse_config(document), dir.file("run"));
    CAPTURE(summary.dump(2));
    CHECK(summary["strategy"] == "damped-sum");
    CHECK(summary["strategy_parameters"]["scale"].get<double>() == doctest::Approx(0.5));
    CHECK(summary["workers_finished"] == 2);
    CHECK(summary["updates_applied"].get<double>() > 0);
    CHECK(summary["final_test_accuracy"].get<double>() >= 0.9);
}

TEST_CASE("register_strategy refuses a taken name, a malformed one and an empty factory") {
    register_once();
    for (const char* taken : {"adag", "sequential", "damped-sum"}) {
        CAPTURE(taken);
        try {
            tether::register_strategy(taken, "again", damped_sum::make);
            FAIL("a taken name was registered again");
        } catch (const std::invalid_argument& e) {
            CHECK(contains(e.what(), std::string("\"") + taken + "\" is already a strategy"));
        }
    }
    CHECK_THROWS_AS(tether::register_strategy("My Strategy", "", damped_sum::make), std::invalid_argument);
    CHECK_THROWS_AS(tether::register_strategy("", "", damped_sum::make), std::invalid_argument);
    CHECK_THROWS_AS(tether::register_strategy("no-factory", "", nullptr), std::invalid_argument);
}
