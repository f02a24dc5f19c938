// The local optimizers against hand-computed steps (the rules in src/optim/optimizer.hpp), and
// each one run to the known minimum of a quadratic.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backend/backend.hpp"
#include "optim/optimizer.hpp"

namespace {

using namespace tether;

OptimizerConfig optimizer(const std::string& name, double learning_rate) {
    OptimizerConfig c;
    c.name = name;
    c.learning_rate = learning_rate;
    return c;
}

// Runs `config` for one step per gradient, from x0, and returns x after each step.
std::vector<std::vector<float>> steps(const OptimizerConfig& config, std::vector<float> x0,
                                      const std::vector<std::vector<float>>& gradients) {
    auto backend = make_backend({"cpu", 1, 0});
    DeviceBuffer<float> x(*backend, x0.size()), g(*backend, x0.size());
    x.upload(x0.data(), x0.size());
    auto opt = make_optimizer(config, *backend, x0.size());
    std::vector<std::vector<float>> trajectory;
    for (const auto& gradient : gradients) {
        g.upload(gradient.data(), gradient.size());
        opt->step(x.data(), g.data());
        std::vector<float> now(x0.size());
        x.download(now.data(), now.size());
        trajectory.push_back(now);
    }
    return trajectory;
}

void check_close(const std::vector<float>& got, const std::vector<double>& expected, double tolerance = 1e-6) {
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(got[i] == doctest::Approx(expected[i]).epsilon(tolerance).scale(1.0));
    }
}

const std::vector<float> kStart{1.f, -2.f, 0.5f};
const std::vector<float> kFirst{0.5f, -1.f, 2.f};
const std::vector<float> kSecond{-0.5f, 2.f, 2.f};

}  // namespace

TEST_CASE("sgd: x <- x - lr g") {
    const auto x = steps(optimizer("sgd", 0.1), kStart, {kFirst, kSecond});
    // 1 - 0.1 * 0.5 = 0.95;  -2 + 0.1 = -1.9;  0.5 - 0.2 = 0.3
    check_close(x[0], {0.95, -1.9, 0.3});
    // 0.95 + 0.05 = 1.0;  -1.9 - 0.2 = -2.1;  0.3 - 0.2 = 0.1
    check_close(x[1], {1.0, -2.1, 0.1});
}

TEST_CASE("nesterov: u <- mu u - lr g; x <- x + mu u - lr g") {
    OptimizerConfig c = optimizer("nesterov", 0.1);
    c.momentum = 0.9;
    const auto x = steps(c, kStart, {kFirst, kFirst});
    // Step 1 from u = 0: u = -0.1 g = (-0.05, 0.1, -0.2);
    //   x += 0.9 u - 0.1 g = (-0.045 - 0.05, 0.09 + 0.1, -0.18 - 0.2) = (-0.095, 0.19, -0.38).
    check_close(x[0], {0.905, -1.81, 0.12});
    // Step 2, same g: u = 0.9 u - 0.1 g = (-0.095, 0.19, -0.38);
    //   x += 0.9 u - 0.1 g = (-0.0855 - 0.05, 0.171 + 0.1, -0.342 - 0.2) = (-0.1355, 0.271, -0.542).
    // (Heavy-ball momentum, x += u, would give 0.81 for the first element.)
    check_close(x[1], {0.7695, -1.539, -0.422});
}

TEST_CASE("adam: bias-corrected moments") {
    OptimizerConfig c = optimizer("adam", 0.1);
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.epsilon = 1e-8;
    const auto x = steps(c, kStart, {kFirst, kSecond});
    // Step 1: m = 0.1 g, v = 0.001 g^2; corrected m^ = g, v^ = g^2, so x -= 0.1 g / |g| = 0.1 sign(g).
    check_close(x[0], {0.9, -1.9, 0.4});
    // Step 2 (corrections 1 - 0.9^2 = 0.19 and 1 - 0.999^2 = 0.001999):
    //   x0: m = 0.045 - 0.05 = -0.005, v = 0.00024975 + 0.00025 = 0.00049975;
    //       m^ = -0.0263158, v^ = 0.25; x = 0.9 + 0.1 * 0.0263158 / 0.5 = 0.9052632
    //   x1: m = -0.09 + 0.2 = 0.11, v = 0.000999 + 0.004 = 0.004999;
    //       m^ = 0.5789474, v^ = 2.5007504, sqrt = 1.5813761; x = -1.9 - 0.1 * 0.3660996... = -1.9366104
    //   x2: m = 0.18 + 0.2 = 0.38, v = 0.003996 + 0.004 = 0.007996; m^ = 2, v^ = 4; x = 0.4 - 0.1 = 0.3
    // Float rounding of v is magnified by 1 / (1 - 0.999^2) = 500, hence the looser tolerance.
    check_close(x[1], {0.9052632, -1.9366104, 0.3}, 2e-5);
}

TEST_CASE("adam: epsilon guards a zero gradient") {
    OptimizerConfig c = optimizer("adam", 0.1);
    const auto x = steps(c, kStart, {{0.f, 0.f, 0.f}});
    check_close(x[0], {1.0, -2.0, 0.5});
}

TEST_CASE("each optimizer finds the minimum of a quadratic") {
    // f(x) = 1/2 sum a_i (x_i - c_i)^2 has its minimum at c; the gradient is a (x - c).
    const std::vector<float> curvature{1.f, 0.5f, 2.f}, centre{3.f, -1.f, 0.25f};
    for (const char* name : {"sgd", "nesterov", "adam"}) {
        CAPTURE(name);
        OptimizerConfig c = optimizer(name, std::string(name) == "adam" ? 0.05 : 0.1);
        auto backend = make_backend({"cpu", 1, 0});
        DeviceBuffer<float> x(*backend, 3), g(*backend, 3);
        std::vector<float> host{0.f, 0.f, 0.f}, gradient(3);
        x.upload(host.data(), 3);
        auto opt = make_optimizer(c, *backend, 3);
        for (int step = 0; step < 2000; ++step) {
            x.download(host.data(), 3);
            for (int i = 0; i < 3; ++i) gradient[i] = curvature[i] * (host[i] - centre[i]);
            g.upload(gradient.data(), 3);
            opt->step(x.data(), g.data());
        }
        x.download(host.data(), 3);
        for (int i = 0; i < 3; ++i) CHECK(host[i] == doctest::Approx(centre[i]).epsilon(1e-3).scale(1.0));
    }
}

TEST_CASE("make_optimizer rejects an unknown name") {
    auto backend = make_backend({"cpu", 1, 0});
    CHECK_THROWS_WITH_AS(make_optimizer(optimizer("adagrad", 0.1), *backend, 3),
                         doctest::Contains("adagrad"), std::invalid_argument);
}
