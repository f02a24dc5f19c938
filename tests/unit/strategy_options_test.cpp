// What parse_config makes of a `strategy` block: the defaults the strategy headers document
// (alpha = 0.9 / N, the communication windows) and the blocks that cannot work, each a
// ConfigError naming the key.
#include <doctest/doctest.h>

#include "test_support.hpp"

#include "config_support.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "strategy/registry.hpp"
#include "strategy/configured_strategy.hpp"
#include "config/config.hpp"
#include "util/errors.hpp"

namespace {

using nlohmann::json;
using tether::CenterState;
using tether::ConfigError;

using tether::testing::strategy;

using tether::testing::parse_error;

using tether::testing::contains;

}  // namespace

TEST_CASE("the default moving rate is 0.9 / N") {
    for (const char* name : {"aeasgd", "easgd"})
        for (int workers : {1, 2, 3, 4}) {
            CAPTURE(name);
            CAPTURE(workers);
            const auto s = strategy({{"strategy", {{"name", name}}}, {"cluster", {{"workers", workers}}}});
            CHECK(s->describe()["moving_rate"].get<double>() == doctest::Approx(0.9 / workers));
            CHECK(s->communication_window() == 10);
        }
    // And the rule uses it: e = 0.3 (x_i - x~) with 3 workers.
    const auto s = strategy({{"strategy", {{"name", "aeasgd"}}}, {"cluster", {{"workers", 3}}}});
    auto center_rule = s->make_center_rule({3, 3});
    CenterState center{{1.f, -1.f, 0.5f}, 0};
    const std::vector<float> x_i{2.f, 0.f, 5.f};
    std::vector<float> reply(3);
    center_rule->apply(center, {0, 0, x_i.data(), x_i.size()}, reply.data());
    REQUIRE(reply.size() == 3);
    CHECK(reply[0] == doctest::Approx(0.3));
    CHECK(reply[1] == doctest::Approx(0.3));
    CHECK(reply[2] == doctest::Approx(1.35));
}

TEST_CASE("the default communication windows") {
    for (const char* name : {"averaging", "easgd", "aeasgd"}) {
        CAPTURE(name);
        CHECK(strategy({{"strategy", {{"name", name}}}})->communication_window() == 10);
    }
    for (const char* name : {"downpour", "adag", "dynsgd"}) {
        CAPTURE(name);
        CHECK(strategy({{"strategy", {{"name", name}}}})->communication_window() == 5);
    }
    CHECK(strategy({{"strategy", {{"name", "adag"}, {"communication_window", 7}}}})->communication_window() == 7);
}

TEST_CASE("strategy blocks that cannot work are ConfigErrors") {
    SUBCASE("easgd with N alpha >= 1 is unstable") {
        const std::string error =
            parse_error({{"strategy", {{"name", "easgd"}, {"moving_rate", 0.5}}}, {"cluster", {{"workers", 2}}}});
        CHECK(contains(error, "strategy.moving_rate"));
        CHECK(contains(error, "beta"));
        CHECK(contains(parse_error({{"strategy", {{"name", "easgd"}, {"moving_rate", 0.4}}}, {"cluster", {{"workers", 3}}}}),
                       "strategy.moving_rate"));
        CHECK(parse_error({{"strategy", {{"name", "easgd"}, {"moving_rate", 0.3}}}, {"cluster", {{"workers", 3}}}}).empty());
        // beta = 1 exactly is refused too, and the error says how to run it anyway.
        const std::string boundary =
            parse_error({{"strategy", {{"name", "easgd"}, {"moving_rate", 0.5}}}, {"cluster", {{"workers", 2}}}});
        CHECK(contains(boundary, "beta = N alpha = 1.0"));
        CHECK(contains(boundary, "strategy.allow_unstable: true"));
    }
    SUBCASE("easgd with allow_unstable runs beta >= 1; other strategies do not take the key") {
        for (double rate : {0.5, 0.75}) {
            CAPTURE(rate);
            const json unstable = {{"strategy", {{"name", "easgd"}, {"moving_rate", rate}, {"allow_unstable", true}}},
                                   {"cluster", {{"workers", 2}}}};
            CHECK(parse_error(unstable).empty());
            CHECK(tether::parse_config(unstable).resolved["strategy"]["allow_unstable"] == true);
        }
        CHECK(contains(parse_error({{"strategy", {{"name", "easgd"}, {"moving_rate", 0.75}, {"allow_unstable", false}}},
                                    {"cluster", {{"workers", 2}}}}),
                       "beta"));
        CHECK(contains(parse_error({{"strategy", {{"name", "easgd"}, {"allow_unstable", "yes"}}}, {"cluster", {{"workers", 2}}}}),
                       "strategy.allow_unstable: expected true or false"));
        CHECK(contains(parse_error({{"strategy", {{"name", "aeasgd"}, {"allow_unstable", true}}}, {"cluster", {{"workers", 2}}}}),
                       "strategy.allow_unstable: unknown key"));
        // The moving rate itself stays at most 1: a worker never steps past x~_old.
        CHECK(contains(parse_error({{"strategy", {{"name", "easgd"}, {"moving_rate", 1.5}, {"allow_unstable", true}}},
                                    {"cluster", {{"workers", 2}}}}),
                       "strategy.moving_rate"));
    }
    SUBCASE("sequential with more than one worker") {
        const std::string error = parse_error({{"strategy", {{"name", "sequential"}}}, {"cluster", {{"workers", 2}}}});
        CHECK(contains(error, "cluster.workers"));
        CHECK(contains(error, "sequential"));
        CHECK(parse_error({{"strategy", {{"name", "sequential"}}}}).empty());
    }
    SUBCASE("a key the chosen strategy does not have") {
        const std::string error =
            parse_error({{"strategy", {{"name", "adag"}, {"moving_rate", 0.1}}}, {"cluster", {{"workers", 2}}}});
        CHECK(contains(error, "strategy.moving_rate"));
        CHECK(contains(error, "unknown key"));
        CHECK(contains(parse_error({{"strategy", {{"name", "averaging"}, {"moving_rate", 0.1}}}}), "strategy.moving_rate"));
        CHECK(contains(parse_error({{"strategy", {{"name", "aeasgd"}, {"comunication_window", 3}}}}),
                       "did you mean strategy.communication_window?"));
    }
    SUBCASE("an unknown strategy name lists the registered ones") {
        const std::string error = parse_error({{"strategy", {{"name", "hogwild"}}}});
        CHECK(contains(error, "strategy.name"));
        for (const auto& name : tether::strategy_names()) CHECK(contains(error, name));
    }
    SUBCASE("moving_rate out of range") {
        CHECK(contains(parse_error({{"strategy", {{"name", "aeasgd"}, {"moving_rate", 0.0}}}}), "strategy.moving_rate"));
        CHECK(contains(parse_error({{"strategy", {{"name", "aeasgd"}, {"moving_rate", 1.5}}}}), "strategy.moving_rate"));
    }
}
