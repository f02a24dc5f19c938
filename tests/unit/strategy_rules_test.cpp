// Each strategy's two halves, WorkerRule and CenterRule, against values computed by hand from
// the table in docs/strategies.md ("Overview") on 3-element vectors. Strategies are
// built the way a run builds them: parse_config -> registry -> config.cluster.strategy.
#include <doctest/doctest.h>

#include "test_support.hpp"

#include "config_support.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "strategy/configured_strategy.hpp"
#include "util/errors.hpp"

namespace {

using nlohmann::json;
using tether::Backend;
using tether::CenterRule;
using tether::CenterState;
using tether::ConfigError;
using tether::DeviceBuffer;
using tether::Exchange;
using tether::Strategy;
using tether::StrategyContext;
using tether::WorkerRule;
using Vec = std::vector<float>;

constexpr std::size_t kSize = 3;

using tether::testing::strategy;

using tether::testing::parse_error;

using tether::testing::contains;

void check_equal(const Vec& actual, const Vec& expected) {
    REQUIRE(actual.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        CAPTURE(i);
        CHECK(actual[i] == doctest::Approx(expected[i]).epsilon(1e-6));
    }
}

double norm(const Vec& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return std::sqrt(s);
}

// A worker: its rule and its x_i in the backend's memory.
struct Worker {
    Backend& backend;
    std::unique_ptr<WorkerRule> rule;
    DeviceBuffer<float> x;

    Worker(Backend& b, const Strategy& s, int workers) : backend(b), rule(s.make_worker_rule({workers, kSize})), x(b, kSize) {}

    // Every worker starts from x~, as the welcome sets it.
    void join(const Vec& center) {
        set(center);
        rule->on_join(backend, x.data(), center.data());
    }
    void set(const Vec& value) { x.upload(value.data(), kSize); }
    Vec get() const {
        Vec v(kSize);
        x.download(v.data(), kSize);
        return v;
    }
    Vec payload() {
        Vec p(kSize);
        rule->make_payload(backend, x.data(), p.data());
        return p;
    }
    // As tether passes it: a buffer the rule may keep, which the caller lets go of at once.
    void apply(const Vec& reply) {
        const auto received = std::make_shared<const Vec>(reply);
        rule->apply_shared(backend, x.data(), std::shared_ptr<const float>(received, received->data()));
    }
    // A plain pointer, as a caller of the rule outside tether may give it: the rule copies.
    void apply_plain(const Vec& reply) { rule->apply_reply(backend, x.data(), reply.data()); }
};

Exchange exchange_of(std::uint32_t worker, std::uint64_t pull_version, const Vec& payload) {
    return Exchange{worker, pull_version, payload.data(), payload.size()};
}

// One synchronous round: worker k contributes contributions[k]; returns the reply.
Vec one_round(CenterRule& rule, CenterState& center, const std::vector<Vec>& contributions, std::uint64_t pull_version = 0) {
    for (std::size_t k = 0; k < contributions.size(); ++k)
        rule.contribute(center, exchange_of(std::uint32_t(k), pull_version, contributions[k]));
    Vec reply(center.x.size());
    rule.close_round(center, reply.data());
    return reply;
}

// x~ = (1, -1, 0.5); after local training x_1 = (2, 0, 5), x_2 = (0, 4, 1).
const Vec kCenter{1.f, -1.f, 0.5f}, kX1{2.f, 0.f, 5.f}, kX2{0.f, 4.f, 1.f};

struct Fixture {
    std::unique_ptr<Backend> backend = tether::make_backend({"cpu", 1, 0});
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "averaging: x~ <- mean of the x_i; every worker takes x~") {
    const auto s = strategy({{"strategy", {{"name", "averaging"}}}, {"cluster", {{"workers", 2}}}});
    REQUIRE(s->name() == "averaging");
    auto center_rule = s->make_center_rule({2, kSize});
    CHECK(center_rule->synchronous());
    Worker w1(*backend, *s, 2), w2(*backend, *s, 2);
    w1.join(kCenter);
    w2.join(kCenter);
    w1.set(kX1);
    w2.set(kX2);

    CenterState center{kCenter, 0};
    const Vec p1 = w1.payload(), p2 = w2.payload();
    check_equal(p1, kX1);  // the worker sends x_i itself
    center_rule->contribute(center, exchange_of(0, 0, p1));
    center_rule->contribute(center, exchange_of(1, 0, p2));
    check_equal(center.x, kCenter);  // nothing moves before the round closes
    Vec reply(3);
    const double moved = center_rule->close_round(center, reply.data());
    const Vec mean{1.f, 2.f, 3.f};
    check_equal(center.x, mean);
    check_equal(reply, mean);
    CHECK(moved == doctest::Approx(norm({0.f, 3.f, 2.5f})));
    w1.apply(reply);
    w2.apply(reply);
    check_equal(w1.get(), mean);
    check_equal(w2.get(), mean);

    // The next round starts from an empty sum.
    center_rule->contribute(center, exchange_of(0, 1, kX2));
    center_rule->close_round(center, reply.data());
    check_equal(center.x, kX2);
    CHECK_THROWS_AS(center_rule->apply(center, exchange_of(0, 0, kX1), reply.data()), std::logic_error);
}

TEST_CASE_FIXTURE(Fixture, "easgd: reply x~_old, x~ <- x~ + alpha sum(x_i - x~_old), x_i <- x_i - alpha(x_i - x~_old)") {
    const auto s = strategy({{"strategy", {{"name", "easgd"}, {"moving_rate", 0.25}}}, {"cluster", {{"workers", 2}}}});
    REQUIRE(s->name() == "easgd");
    CHECK(s->describe()["moving_rate"] == 0.25);
    auto center_rule = s->make_center_rule({2, kSize});
    CHECK(center_rule->synchronous());
    Worker w1(*backend, *s, 2), w2(*backend, *s, 2);
    w1.join(kCenter);
    w2.join(kCenter);
    w1.set(kX1);
    w2.set(kX2);

    CenterState center{kCenter, 0};
    center_rule->contribute(center, exchange_of(0, 0, w1.payload()));
    center_rule->contribute(center, exchange_of(1, 0, w2.payload()));
    Vec reply(3);
    const double moved = center_rule->close_round(center, reply.data());
    // sum(x_i - x~) = (1, 1, 4.5) + (-1, 5, 0.5) = (0, 6, 5); x~ + 0.25 * that:
    check_equal(center.x, {1.f, 0.5f, 1.75f});
    check_equal(reply, kCenter);  // x~_old
    CHECK(moved == doctest::Approx(norm({0.f, 1.5f, 1.25f})));
    w1.apply(reply);
    w2.apply(reply);
    check_equal(w1.get(), {1.75f, -0.25f, 3.875f});
    check_equal(w2.get(), {0.25f, 2.75f, 0.875f});
}

TEST_CASE_FIXTURE(Fixture, "easgd with allow_unstable: beta = N alpha = 1.5 overshoots the workers' mean, as asked") {
    const auto s = strategy({{"strategy", {{"name", "easgd"}, {"moving_rate", 0.75}, {"allow_unstable", true}}},
                             {"cluster", {{"workers", 2}}}});
    CHECK(s->describe()["moving_rate"] == 0.75);
    auto center_rule = s->make_center_rule({2, kSize});
    CenterState center{kCenter, 0};
    one_round(*center_rule, center, {kX1, kX2});
    // x~ + 0.75 (0, 6, 5) = (1, 3.5, 4.25): the workers' mean is (1, 2, 3), so x~ goes half as far
    // again past it, (1 - beta) x~ + beta mean with beta = 1.5.
    check_equal(center.x, {1.f, 3.5f, 4.25f});
}

TEST_CASE_FIXTURE(Fixture, "aeasgd: e = alpha(x_i - x~) from the current x~; x~ += e; x_i -= e") {
    const auto s = strategy({{"strategy", {{"name", "aeasgd"}, {"moving_rate", 0.25}}}, {"cluster", {{"workers", 2}}}});
    REQUIRE(s->name() == "aeasgd");
    auto center_rule = s->make_center_rule({2, kSize});
    CHECK_FALSE(center_rule->synchronous());
    Worker w1(*backend, *s, 2), w2(*backend, *s, 2);
    w1.join(kCenter);
    w2.join(kCenter);
    w1.set(kX1);
    w2.set(kX2);

    CenterState center{kCenter, 0};
    Vec reply(3);
    const Vec p1 = w1.payload();
    check_equal(p1, kX1);
    double moved = center_rule->apply(center, exchange_of(0, 0, p1), reply.data());
    const Vec e1{0.25f, 0.25f, 1.125f};  // 0.25 * ((2, 0, 5) - (1, -1, 0.5))
    check_equal(reply, e1);
    check_equal(center.x, {1.25f, -0.75f, 1.625f});
    CHECK(moved == doctest::Approx(norm(e1)));
    w1.apply(reply);
    check_equal(w1.get(), {1.75f, -0.25f, 3.875f});

    // The second worker is pulled towards the x~ the first one already moved.
    moved = center_rule->apply(center, exchange_of(1, 0, w2.payload()), reply.data());
    const Vec e2{-0.3125f, 1.1875f, -0.15625f};  // 0.25 * ((0, 4, 1) - (1.25, -0.75, 1.625))
    check_equal(reply, e2);
    check_equal(center.x, {0.9375f, 0.4375f, 1.46875f});
    w2.apply(reply);
    check_equal(w2.get(), {0.3125f, 2.8125f, 1.15625f});
    CHECK_THROWS_AS(center_rule->contribute(center, exchange_of(0, 0, p1)), std::logic_error);
}

TEST_CASE_FIXTURE(Fixture, "eamsgd: the aeasgd exchange, with Nesterov as the local optimizer") {
    const json document = {{"strategy", {{"name", "eamsgd"}, {"moving_rate", 0.25}}},
                           {"cluster", {{"workers", 2}}},
                           {"training", {{"optimizer", {{"name", "nesterov"}}}}}};
    const auto s = strategy(document);
    REQUIRE(s->name() == "eamsgd");
    auto center_rule = s->make_center_rule({2, kSize});
    CHECK_FALSE(center_rule->synchronous());
    Worker w1(*backend, *s, 2);
    w1.join(kCenter);
    w1.set(kX1);
    CenterState center{kCenter, 0};
    Vec reply(3);
    center_rule->apply(center, exchange_of(0, 0, w1.payload()), reply.data());
    check_equal(reply, {0.25f, 0.25f, 1.125f});
    check_equal(center.x, {1.25f, -0.75f, 1.625f});
    w1.apply(reply);
    check_equal(w1.get(), {1.75f, -0.25f, 3.875f});

    json with_adam = document;
    with_adam["training"]["optimizer"]["name"] = "adam";
    const std::string error = parse_error(with_adam);
    CHECK(contains(error, "eamsgd"));
    CHECK(contains(error, "training.optimizer.name"));
    CHECK(contains(error, "\"adam\""));
    CHECK(contains(error, "nesterov"));
    // adam is also the default local optimizer.
    CHECK(contains(parse_error({{"strategy", {{"name", "eamsgd"}}}, {"cluster", {{"workers", 2}}}}), "nesterov"));
}

TEST_CASE_FIXTURE(Fixture, "downpour: send x_i - x_pull; x~ += it; x_i and x_pull become x~") {
    const auto s = strategy({{"strategy", {{"name", "downpour"}}}, {"cluster", {{"workers", 2}}}});
    REQUIRE(s->name() == "downpour");
    CHECK(s->communication_window() == 5);  // the documented default
    auto center_rule = s->make_center_rule({2, kSize});
    CHECK_FALSE(center_rule->synchronous());
    Worker w1(*backend, *s, 2), w2(*backend, *s, 2);
    w1.join(kCenter);
    w2.join(kCenter);
    check_equal(w1.payload(), {0.f, 0.f, 0.f});  // no local work yet
    w1.set(kX1);
    w2.set(kX2);

    CenterState center{kCenter, 0};
    Vec reply(3);
    const Vec d1 = w1.payload();
    check_equal(d1, {1.f, 1.f, 4.5f});
    double moved = center_rule->apply(center, exchange_of(0, 0, d1), reply.data());
    check_equal(center.x, kX1);
    check_equal(reply, kX1);
    CHECK(moved == doctest::Approx(norm(d1)));
    center.version = 1;  // the Center counts versions, not the rule
    w1.apply(reply);
    check_equal(w1.get(), kX1);

    // The second worker's whole update lands on the x~ the first one moved: (2, 0, 5) + (-1, 5, 0.5).
    const Vec d2 = w2.payload();
    check_equal(d2, {-1.f, 5.f, 0.5f});
    center_rule->apply(center, exchange_of(1, 0, d2), reply.data());
    check_equal(center.x, {1.f, 5.f, 5.5f});
    w2.apply(reply);
    check_equal(w2.get(), {1.f, 5.f, 5.5f});

    // x_pull moved with x: the next payload is only the new local work.
    w2.set({1.5f, 5.f, 3.5f});
    check_equal(w2.payload(), {0.5f, 0.f, -2.f});
}

TEST_CASE_FIXTURE(Fixture, "adag: the payload is (x_i - x_pull) / communication_window") {
    const auto s = strategy({{"strategy", {{"name", "adag"}, {"communication_window", 4}}}, {"cluster", {{"workers", 2}}}});
    REQUIRE(s->name() == "adag");
    CHECK(s->communication_window() == 4);
    auto center_rule = s->make_center_rule({2, kSize});
    Worker w1(*backend, *s, 2);
    w1.join(kCenter);
    w1.set(kX1);
    const Vec p = w1.payload();
    check_equal(p, {0.25f, 0.25f, 1.125f});  // (1, 1, 4.5) / 4
    CenterState center{kCenter, 0};
    Vec reply(3);
    center_rule->apply(center, exchange_of(0, 0, p), reply.data());
    check_equal(center.x, {1.25f, -0.75f, 1.625f});
    check_equal(reply, center.x);
    w1.apply(reply);
    check_equal(w1.get(), center.x);
    check_equal(w1.payload(), {0.f, 0.f, 0.f});

    // The last window of a run may be shorter (here 2 of 4 steps): it is divided by tau all the
    // same, so its steps weigh on x~ as every other step does.
    w1.set({2.25f, 0.25f, 1.625f});
    check_equal(w1.payload(), {0.25f, 0.25f, 0.f});  // ((2.25, 0.25, 1.625) - (1.25, -0.75, 1.625)) / 4
}

TEST_CASE_FIXTURE(Fixture, "dynsgd: the update is divided by staleness + 1, staleness = v - v_pull") {
    const auto s = strategy({{"strategy", {{"name", "dynsgd"}}}, {"cluster", {{"workers", 2}}}});
    REQUIRE(s->name() == "dynsgd");
    auto center_rule = s->make_center_rule({2, kSize});
    Worker w1(*backend, *s, 2);
    w1.join(kCenter);  // at version 3, which the worker's session sends with its exchanges
    w1.set({4.f, -7.f, 2.f});
    const Vec d = w1.payload();
    check_equal(d, {3.f, -6.f, 1.5f});  // not scaled on the worker

    SUBCASE("stale by 2: a third of the update") {
        CenterState center{kCenter, 5};
        Vec reply(3);
        const double moved = center_rule->apply(center, exchange_of(0, 3, d), reply.data());
        check_equal(center.x, {2.f, -3.f, 1.f});
        check_equal(reply, center.x);
        CHECK(moved == doctest::Approx(norm(d) / 3));
        CHECK(center.version == 5);
        w1.apply(reply);
        check_equal(w1.get(), center.x);
    }
    SUBCASE("fresh: the whole update") {
        CenterState center{kCenter, 3};
        Vec reply(3);
        center_rule->apply(center, exchange_of(0, 3, d), reply.data());
        check_equal(center.x, {4.f, -7.f, 2.f});
    }
}

TEST_CASE_FIXTURE(Fixture, "the pull-push rules keep the reply as x_pull in host memory, and let go of it on joining again") {
    for (const char* name : {"downpour", "adag", "dynsgd", "adag-staleness"}) {
        CAPTURE(name);
        const auto s = strategy({{"strategy", {{"name", name}, {"communication_window", 2}}}, {"cluster", {{"workers", 2}}}});
        Worker kept(*backend, *s, 2), copied(*backend, *s, 2);
        kept.join(kCenter);
        copied.join(kCenter);
        const auto reply = std::make_shared<const Vec>(kX1);
        const std::shared_ptr<const float> shared(reply, reply->data());
        kept.rule->apply_shared(*backend, kept.x.data(), shared);
        copied.apply_plain(kX1);
        CHECK(reply.use_count() == 3);  // here twice, and the rule
        check_equal(kept.get(), kX1);
        // The next payload is the same from the kept reply as from a copy of it.
        kept.set(kX2);
        copied.set(kX2);
        check_equal(kept.payload(), copied.payload());
        // Joining again (the center forgot the worker) starts x_pull from x: the reply is let go.
        kept.join(kCenter);
        CHECK(reply.use_count() == 2);
        kept.set(kX2);
        copied.join(kCenter);
        copied.set(kX2);
        check_equal(kept.payload(), copied.payload());
    }
}

// The center answers in the buffer the exchange arrived in (no copy): every asynchronous rule
// must give the same x~ and the same reply when `reply` is the payload itself.
TEST_CASE("asynchronous center rules give the same result when the reply overwrites the payload") {
    for (const char* name : {"aeasgd", "eamsgd", "downpour", "adag", "dynsgd", "adag-staleness"}) {
        CAPTURE(name);
        json document = {{"strategy", {{"name", name}}}, {"cluster", {{"workers", 2}}}};
        if (std::string(name) == "eamsgd") document["training"] = {{"optimizer", {{"name", "nesterov"}}}};
        const auto s = strategy(document);
        auto separate = s->make_center_rule({2, kSize});
        auto in_place = s->make_center_rule({2, kSize});
        CenterState a{kCenter, 3}, b{kCenter, 3};
        Vec payload = kX1, reply(kSize);
        const double moved_separate = separate->apply(a, exchange_of(0, 1, payload), reply.data());
        const double moved_in_place = in_place->apply(b, exchange_of(0, 1, payload), payload.data());
        check_equal(b.x, a.x);
        check_equal(payload, reply);
        CHECK(moved_in_place == doctest::Approx(moved_separate));
    }
}

TEST_CASE_FIXTURE(Fixture, "diloco: outer Nesterov step on x~ - mean(x_i), by hand over two rounds") {
    const auto s = strategy({{"strategy", {{"name", "diloco"}}}, {"cluster", {{"workers", 2}}}});
    CHECK(s->describe()["outer_learning_rate"].get<double>() == doctest::Approx(0.7));
    CHECK(s->describe()["outer_momentum"].get<double>() == doctest::Approx(0.9));
    CHECK(s->describe()["nesterov"].get<bool>());
    auto center_rule = s->make_center_rule({2, kSize});
    CHECK(center_rule->synchronous());
    CenterState center{kCenter, 0};
    // Round 1: mean = (1, 2, 3), g = x~ - mean = (0, -3, -2.5), v = g,
    // x~ <- x~ - 0.7 (g + 0.9 v) = x~ - 1.33 g = (1, 2.99, 3.825).
    Vec reply = one_round(*center_rule, center, {kX1, kX2});
    check_equal(center.x, {1.f, 2.99f, 3.825f});
    check_equal(reply, center.x);
    // Round 2: the workers did not move (mean = x~, g = 0), yet momentum carries x~ on:
    // v = 0.9 (0, -3, -2.5); x~ <- x~ - 0.7 (0.9 v) = (1, 2.99 + 1.701, 3.825 + 1.4175).
    const Vec same = center.x;
    center_rule->contribute(center, exchange_of(0, 1, same));
    center_rule->contribute(center, exchange_of(1, 1, same));
    center_rule->close_round(center, reply.data());
    check_equal(center.x, {1.f, 4.691f, 5.2425f});
}

TEST_CASE_FIXTURE(Fixture, "diloco with outer lr 1 and no momentum is model averaging") {
    const auto diloco = strategy({{"strategy", {{"name", "diloco"}, {"outer_learning_rate", 1.0}, {"outer_momentum", 0.0}}},
                                  {"cluster", {{"workers", 2}}}});
    const auto averaging = strategy({{"strategy", {{"name", "averaging"}}}, {"cluster", {{"workers", 2}}}});
    auto a = diloco->make_center_rule({2, kSize});
    auto b = averaging->make_center_rule({2, kSize});
    CenterState ca{kCenter, 0}, cb{kCenter, 0};
    Vec ra(3), rb(3);
    // Three rounds with different x_i each time: x~ and the replies stay equal.
    for (float shift : {0.f, 1.5f, -4.f}) {
        Vec x1 = kX1, x2 = kX2;
        for (float& v : x1) v += shift;
        for (float& v : x2) v -= 2 * shift;
        for (auto* rule : {a.get(), b.get()}) {
            CenterState& c = rule == a.get() ? ca : cb;
            rule->contribute(c, exchange_of(0, 0, x1));
            rule->contribute(c, exchange_of(1, 0, x2));
        }
        a->close_round(ca, ra.data());
        b->close_round(cb, rb.data());
        check_equal(ca.x, cb.x);
        check_equal(ra, rb);
    }
    // The worker half is averaging's: x_i <- x~.
    Worker w(*backend, *diloco, 2);
    w.join(kCenter);
    w.set(kX1);
    check_equal(w.payload(), kX1);
    w.apply(ra);
    check_equal(w.get(), ra);
}

TEST_CASE_FIXTURE(Fixture, "adag-staleness: each element of a commit scaled by 1 / ((x~ - x~pull)^2 / gamma + 1), by hand") {
    const auto s = strategy({{"strategy", {{"name", "adag-staleness"}, {"gamma", 1.0}, {"communication_window", 2}}},
                             {"cluster", {{"workers", 2}}}});
    auto center_rule = s->make_center_rule({2, kSize});
    CHECK_FALSE(center_rule->synchronous());
    CenterState center{kCenter, 0};
    center_rule->on_join(center, 0);
    center_rule->on_join(center, 1);
    Vec reply(3);
    // Worker 1 commits first: x~ has not moved since its pull, so its commit lands whole.
    double moved = center_rule->apply(center, exchange_of(1, 0, {1.f, 0.f, 2.f}), reply.data());
    check_equal(center.x, {2.f, -1.f, 2.5f});
    CHECK(moved == doctest::Approx(std::sqrt(5.0)));
    // Worker 0 pulled (1, -1, 0.5): x~ drifted by (1, 0, 2) since, so s = (1/2, 1, 1/5) and
    // its commit (2, 2, 5) moves x~ by (1, 2, 1).
    center_rule->apply(center, exchange_of(0, 0, {2.f, 2.f, 5.f}), reply.data());
    check_equal(center.x, {3.f, 1.f, 3.5f});
    check_equal(reply, center.x);
    // Its next pull is that reply: with nothing in between, the next commit lands whole.
    center_rule->apply(center, exchange_of(0, 2, {1.f, 1.f, 1.f}), reply.data());
    check_equal(center.x, {4.f, 2.f, 4.5f});
    // The worker half is ADAG's: (x_i - x_pull) / tau.
    Worker w(*backend, *s, 2);
    w.join(kCenter);
    w.set(kX1);
    check_equal(w.payload(), {0.5f, 0.5f, 2.25f});
}

// async-diloco (algorithms/async_diloco.cpp): the outer step on each pseudo-gradient as it
// arrives. Two workers with constant pseudo-gradients g1 = x_pull - x_1 and g2, arriving in
// turn; x~ after each arrival computed by hand from the file's equations.
namespace {

// x~ after each of `arrivals` (worker k's constant update u_k = -g_k, k alternating 0, 1, 0,
// ...) under `outer`, staleness 0; the rule's own replies must equal x~.
std::vector<Vec> async_diloco_path(const json& outer, int arrivals, const std::vector<Vec>& updates) {
    json options = {{"name", "async-diloco"}, {"outer_learning_rate", 0.5}, {"outer_momentum", 0.9}};
    options.update(outer);
    const auto s = strategy({{"strategy", options}, {"cluster", {{"workers", 2}}}});
    auto rule = s->make_center_rule({2, 1});
    CHECK_FALSE(rule->synchronous());
    CenterState center{{0.f}, 0};
    std::vector<Vec> path;
    for (int k = 0; k < arrivals; ++k) {
        Vec reply(1);
        rule->apply(center, exchange_of(std::uint32_t(k % 2), center.version, updates[std::size_t(k % 2)]), reply.data());
        ++center.version;
        check_equal(reply, center.x);
        path.push_back(center.x);
    }
    return path;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "async-diloco: delayed Nesterov takes momentum only every D-th arrival, plain steps between") {
    const auto s = strategy({{"strategy", {{"name", "async-diloco"}}}, {"cluster", {{"workers", 2}}}});
    CHECK(s->communication_window() == 50);  // the documented defaults
    CHECK(s->describe()["outer"] == "sgd");
    CHECK(s->describe()["outer_learning_rate"].get<double>() == doctest::Approx(0.5));  // 1 / N
    CHECK(s->describe()["nesterov_delay"] == 2);  // the number of workers
    CHECK_FALSE(s->dynamic_windows());
    const auto four = strategy({{"strategy", {{"name", "async-diloco"}}}, {"cluster", {{"workers", 4}}}});
    CHECK(four->describe()["outer_learning_rate"].get<double>() == doctest::Approx(0.25));
    const auto one = strategy({{"strategy", {{"name", "async-diloco"}}}, {"cluster", {{"workers", 1}}}});
    CHECK(one->describe()["outer_learning_rate"].get<double>() == doctest::Approx(1.0));  // at most 1
    const auto dn = strategy({{"strategy", {{"name", "async-diloco"}, {"outer", "delayed-nesterov"}}}, {"cluster", {{"workers", 2}}}});
    CHECK(dn->describe()["outer_learning_rate"].get<double>() == doctest::Approx(0.7));
    // u1 = -1 (g1 = 1), u2 = -3 (g2 = 3); lr 0.5, mu 0.9, D = 2.
    const std::vector<Vec> u = {{-1.f}, {-3.f}};
    const auto path = async_diloco_path({{"outer", "delayed-nesterov"}, {"nesterov_delay", 2}}, 4, u);
    // 1: plain, x~ = -0.5 * 1/2 = -0.25.
    CHECK(path[0][0] == doctest::Approx(-0.25));
    // 2: milestone: m = 0.9*0 + (1 + 3)/2 = 2; x~ -= 0.5 (3/2 + 0.9*2) = 1.65 -> -1.9.
    CHECK(path[1][0] == doctest::Approx(-1.9));
    // 3: plain: -0.25 -> -2.15.
    CHECK(path[2][0] == doctest::Approx(-2.15));
    // 4: milestone: m = 0.9*2 + 2 = 3.8; x~ -= 0.5 (1.5 + 3.42) = 2.46 -> -4.61.
    CHECK(path[3][0] == doctest::Approx(-4.61));
}

TEST_CASE_FIXTURE(Fixture, "async-diloco: plain Nesterov and SGD per arrival; D = 1 is Nesterov; staleness damps") {
    const std::vector<Vec> u = {{-1.f}, {-3.f}};
    // nesterov: m1 = 1, x~ = -0.5 (1 + 0.9) = -0.95; m2 = 0.9 + 3 = 3.9, x~ -= 0.5 (3 + 3.51) -> -4.205.
    const auto nesterov = async_diloco_path({{"outer", "nesterov"}}, 2, u);
    CHECK(nesterov[0][0] == doctest::Approx(-0.95));
    CHECK(nesterov[1][0] == doctest::Approx(-4.205));
    const auto delay_one = async_diloco_path({{"outer", "delayed-nesterov"}, {"nesterov_delay", 1}}, 2, u);
    CHECK(delay_one[0][0] == doctest::Approx(-0.95));
    CHECK(delay_one[1][0] == doctest::Approx(-4.205));
    // sgd: -0.5, then -2.
    const auto sgd = async_diloco_path({{"outer", "sgd"}}, 2, u);
    CHECK(sgd[0][0] == doctest::Approx(-0.5));
    CHECK(sgd[1][0] == doctest::Approx(-2.0));

    // staleness "inverse": a pseudo-gradient pulled 3 versions ago counts a quarter.
    const auto s = strategy({{"strategy", {{"name", "async-diloco"}, {"outer", "sgd"}, {"outer_learning_rate", 1.0},
                                           {"staleness", "inverse"}}},
                             {"cluster", {{"workers", 2}}}});
    auto rule = s->make_center_rule({2, 1});
    CenterState center{{0.f}, 3};
    Vec reply(1);
    const Vec update{-4.f};
    rule->apply(center, exchange_of(0, 0, update), reply.data());
    CHECK(center.x[0] == doctest::Approx(-1.0));
    // Options are checked by name.
    CHECK(contains(parse_error({{"strategy", {{"name", "async-diloco"}, {"outer", "adam"}}}}), "strategy.outer"));
}
