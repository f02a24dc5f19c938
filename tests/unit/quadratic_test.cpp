// The strategies on a quadratic whose fixed points are known in closed form (the ensmallen
// habit: each update rule is checked where its answer is known). Worker i minimises f_i(x) = 1/2 ||x - c_i||^2 with
// plain SGD, x <- x - eta (x - c_i), for tau local steps between two exchanges; the rounds are
// run here by hand through the WorkerRule and CenterRule objects, with no network.
//
// Fixed points. tau SGD steps take x to c_i + q (x - c_i) with q = (1 - eta)^tau; call that
// x_i'. Measured right after a round:
//   averaging:  x~ <- mean_i x_i', every x_i <- x~.  At the fixed point x~ = c + q (x~ - c)
//               with c = mean_i c_i, so x~ = c, and all workers sit at c after each round.
//   easgd:      x~ <- x~ + alpha sum_i (x_i' - x~),  x_i <- (1 - alpha) x_i' + alpha x~_old.
//               The center is fixed iff sum_i x_i' = N x~. Summing the worker equation over i
//               gives sum_i x_i = N x~, so sum_i x_i' = N c + q (N x~ - N c) = N x~ forces
//               x~ = c (q < 1). Then each worker solves
//                 x_i = (1 - alpha) (c_i + q (x_i - c_i)) + alpha c,
//               that is
//                 x_i = [(1 - alpha)(1 - q) c_i + alpha c] / [1 - (1 - alpha) q],
//               a convex combination of its own minimum and the center (the weights sum to 1).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "strategy/configured_strategy.hpp"

namespace {

using nlohmann::json;
using Vec = std::vector<float>;

constexpr int kWorkers = 3, kTau = 5;
constexpr std::size_t kDim = 4;
constexpr double kEta = 0.1, kAlpha = 0.9 / kWorkers;

const std::vector<Vec> kMinima{{1.f, -2.f, 0.5f, 3.f}, {-1.f, 0.f, 2.f, 1.f}, {3.f, 1.f, -1.f, -4.f}};

Vec mean_of(const std::vector<Vec>& vs) {
    Vec m(kDim, 0.f);
    for (const auto& v : vs)
        for (std::size_t j = 0; j < kDim; ++j) m[j] += v[j] / float(vs.size());
    return m;
}

void check_close(const Vec& actual, const Vec& expected, double tolerance = 1e-4) {
    REQUIRE(actual.size() == expected.size());
    for (std::size_t j = 0; j < expected.size(); ++j) {
        CAPTURE(j);
        CHECK(std::abs(double(actual[j]) - double(expected[j])) < tolerance);
    }
}

// N workers, each with its rule, its x_i (backend memory) and its minimum c_i, and the center.
class Cluster {
public:
    Cluster(const json& strategy_block, std::vector<Vec> minima, Vec start)
        : backend_(tether::make_backend({"cpu", 1, 0})), minima_(std::move(minima)) {
        const json document = {{"strategy", strategy_block}, {"cluster", {{"workers", int(minima_.size())}}}};
        strategy_ = tether::parse_config(document).cluster.strategy;
        const tether::StrategyContext context{int(minima_.size()), kDim};
        center_rule_ = strategy_->make_center_rule(context);
        center_.x = start;
        for (std::size_t i = 0; i < minima_.size(); ++i) {
            rules_.push_back(strategy_->make_worker_rule(context));
            x_.emplace_back(*backend_, kDim);
            x_.back().upload(start.data(), kDim);
            rules_.back()->on_join(*backend_, x_.back().data(), center_.x.data());
            pulled_.push_back(center_.version);
        }
    }

    // tau steps of x <- x - eta (x - c_i) on worker i.
    void train(std::size_t i, int steps) {
        Vec x = worker(i);
        for (int s = 0; s < steps; ++s)
            for (std::size_t j = 0; j < kDim; ++j) x[j] -= float(kEta) * (x[j] - minima_[i][j]);
        x_[i].upload(x.data(), kDim);
    }

    // One synchronous round: everyone trains tau steps, reports, and applies the one reply.
    void synchronous_round() {
        REQUIRE(center_rule_->synchronous());
        std::vector<Vec> payloads(minima_.size(), Vec(kDim));
        for (std::size_t i = 0; i < minima_.size(); ++i) {
            train(i, kTau);
            rules_[i]->make_payload(*backend_, x_[i].data(), payloads[i].data());
            center_rule_->contribute(center_, {std::uint32_t(i), pulled_[i], payloads[i].data(), kDim});
        }
        Vec reply(kDim);
        center_rule_->close_round(center_, reply.data());
        ++center_.version;
        for (std::size_t i = 0; i < minima_.size(); ++i) {
            rules_[i]->apply_reply(*backend_, x_[i].data(), reply.data());
            pulled_[i] = center_.version;
        }
    }

    // Worker i trains tau steps and runs one asynchronous exchange.
    void asynchronous_exchange(std::size_t i) {
        REQUIRE_FALSE(center_rule_->synchronous());
        train(i, kTau);
        Vec payload(kDim), reply(kDim);
        rules_[i]->make_payload(*backend_, x_[i].data(), payload.data());
        center_rule_->apply(center_, {std::uint32_t(i), pulled_[i], payload.data(), kDim}, reply.data());
        ++center_.version;
        rules_[i]->apply_reply(*backend_, x_[i].data(), reply.data());
        pulled_[i] = center_.version;
    }

    Vec worker(std::size_t i) const {
        Vec x(kDim);
        x_[i].download(x.data(), kDim);
        return x;
    }
    const Vec& center() const { return center_.x; }

private:
    std::unique_ptr<tether::Backend> backend_;
    std::vector<Vec> minima_;
    std::shared_ptr<const tether::Strategy> strategy_;
    std::unique_ptr<tether::CenterRule> center_rule_;
    tether::CenterState center_;
    std::vector<std::unique_ptr<tether::WorkerRule>> rules_;
    std::vector<tether::DeviceBuffer<float>> x_;
    // The center version of each worker's last pull, which its session sends with every exchange.
    std::vector<std::uint64_t> pulled_;
};

}  // namespace

TEST_CASE("synchronous EASGD converges to its closed-form fixed point") {
    Cluster cluster({{"name", "easgd"}, {"moving_rate", kAlpha}, {"communication_window", kTau}}, kMinima,
                    Vec(kDim, 0.f));
    for (int round = 0; round < 200; ++round) cluster.synchronous_round();

    const Vec c = mean_of(kMinima);
    const double q = std::pow(1 - kEta, kTau);
    check_close(cluster.center(), c);
    std::vector<Vec> workers;
    for (std::size_t i = 0; i < kWorkers; ++i) {
        CAPTURE(i);
        Vec expected(kDim);
        for (std::size_t j = 0; j < kDim; ++j)
            expected[j] = float(((1 - kAlpha) * (1 - q) * kMinima[i][j] + kAlpha * c[j]) / (1 - (1 - kAlpha) * q));
        check_close(cluster.worker(i), expected);
        workers.push_back(cluster.worker(i));
    }
    // The workers stay apart (each is pulled towards its own minimum) but average to x~.
    check_close(mean_of(workers), cluster.center());
    CHECK(std::abs(workers[0][0] - workers[2][0]) > 0.5f);

    // A fixed point: one more round moves nothing.
    const Vec before = cluster.center();
    const Vec worker_before = cluster.worker(1);
    cluster.synchronous_round();
    check_close(cluster.center(), before, 1e-5);
    check_close(cluster.worker(1), worker_before, 1e-5);
}

TEST_CASE("averaging puts every worker at the center after each round, and the center at the mean minimum") {
    Cluster cluster({{"name", "averaging"}, {"communication_window", kTau}}, kMinima, Vec(kDim, 0.f));
    for (int round = 0; round < 100; ++round) {
        cluster.synchronous_round();
        for (std::size_t i = 0; i < kWorkers; ++i) {
            const Vec x = cluster.worker(i);
            for (std::size_t j = 0; j < kDim; ++j) REQUIRE(x[j] == cluster.center()[j]);
        }
    }
    check_close(cluster.center(), mean_of(kMinima));
}

TEST_CASE("the asynchronous strategies reach a minimum all workers share") {
    // With distinct minima their round-robin orbits have no simple closed form; with one
    // shared minimum every one of them must end there, center and workers alike.
    const std::vector<Vec> shared(kWorkers, kMinima[0]);
    for (const json& block : {json{{"name", "aeasgd"}, {"moving_rate", kAlpha}},
                             json{{"name", "downpour"}},
                             json{{"name", "adag"}, {"communication_window", kTau}},
                             json{{"name", "dynsgd"}}}) {
        CAPTURE(block.dump());
        Cluster cluster(block, shared, Vec(kDim, 0.f));
        for (int turn = 0; turn < 300; ++turn) cluster.asynchronous_exchange(std::size_t(turn % kWorkers));
        check_close(cluster.center(), kMinima[0]);
        for (std::size_t i = 0; i < kWorkers; ++i) check_close(cluster.worker(i), kMinima[0]);
    }
}
