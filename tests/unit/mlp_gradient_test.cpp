// The MLP's analytic gradient (backpropagation) against central finite differences of its own
// loss, on a small random network and batch. A reference forward pass in double, written here
// independently of src/model, checks the loss itself and tells which finite differences
// straddle a ReLU kink (those are skipped: there the loss is not differentiable).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu_backend.hpp"
#include "model/mlp.hpp"

namespace {

using namespace tether;

struct Problem {
    std::vector<std::size_t> sizes;
    int rows = 0;
    std::vector<float> inputs;
    std::vector<std::int32_t> labels;
};

Problem make_problem(std::vector<std::size_t> sizes, int rows, std::uint64_t seed) {
    Problem p{std::move(sizes), rows, {}, {}};
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> gaussian(0.f, 1.f);
    std::uniform_int_distribution<int> label(0, int(p.sizes.back()) - 1);
    p.inputs.resize(std::size_t(rows) * p.sizes.front());
    for (auto& x : p.inputs) x = gaussian(rng);
    for (int r = 0; r < rows; ++r) p.labels.push_back(label(rng));
    return p;
}

// Mean softmax cross-entropy in double, with the layout mlp.hpp documents: per layer W
// (fan_in x fan_out, row-major) then b; ReLU after every layer but the last. `pattern`
// receives the sign of every hidden pre-activation.
double reference_loss(const Problem& problem, const std::vector<float>& parameters, std::vector<bool>* pattern) {
    const auto& sizes = problem.sizes;
    std::vector<double> in(problem.inputs.begin(), problem.inputs.end());
    std::size_t offset = 0;
    if (pattern) pattern->clear();
    for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
        const std::size_t fan_in = sizes[l], fan_out = sizes[l + 1];
        const float* w = parameters.data() + offset;
        const float* b = w + fan_in * fan_out;
        offset += fan_in * fan_out + fan_out;
        const bool hidden = l + 2 < sizes.size();
        std::vector<double> out(std::size_t(problem.rows) * fan_out);
        for (int r = 0; r < problem.rows; ++r)
            for (std::size_t j = 0; j < fan_out; ++j) {
                double z = b[j];
                for (std::size_t i = 0; i < fan_in; ++i) z += in[r * fan_in + i] * double(w[i * fan_out + j]);
                if (hidden && pattern) pattern->push_back(z > 0);
                out[r * fan_out + j] = hidden ? std::max(z, 0.0) : z;
            }
        in = std::move(out);
    }
    const std::size_t classes = sizes.back();
    double total = 0;
    for (int r = 0; r < problem.rows; ++r) {
        const double* z = in.data() + std::size_t(r) * classes;
        const double peak = *std::max_element(z, z + classes);
        double sum = 0;
        for (std::size_t j = 0; j < classes; ++j) sum += std::exp(z[j] - peak);
        total += std::log(sum) + peak - z[problem.labels[std::size_t(r)]];
    }
    return total / problem.rows;
}

// Runs the Mlp on the CPU backend with parameters given on the host.
class Harness {
public:
    explicit Harness(const Problem& problem)
        : problem_(problem),
          backend_(make_backend({"cpu", 1, 0})),
          mlp_(*backend_, problem.sizes),
          parameters_(*backend_, mlp_.num_parameters()),
          gradient_(*backend_, mlp_.num_parameters()),
          inputs_(*backend_, problem.inputs.size()),
          labels_(*backend_, problem.labels.size()) {
        inputs_.upload(problem.inputs.data(), problem.inputs.size());
        labels_.upload(problem.labels.data(), problem.labels.size());
    }

    Mlp& mlp() { return mlp_; }
    Backend& backend() { return *backend_; }

    double loss(const std::vector<float>& parameters) {
        parameters_.upload(parameters.data(), parameters.size());
        return mlp_.evaluate(parameters_.data(), batch());
    }
    double loss_and_gradient(const std::vector<float>& parameters, std::vector<float>& gradient) {
        parameters_.upload(parameters.data(), parameters.size());
        const double loss = mlp_.evaluate_with_gradient(parameters_.data(), batch(), gradient_.data());
        gradient.resize(parameters.size());
        gradient_.download(gradient.data(), gradient.size());
        return loss;
    }
    // Poisons the gradient buffer, so a test sees whether the pass overwrites or accumulates.
    void poison_gradient(float value) { backend_->fill(gradient_.data(), gradient_.size(), value); }

private:
    Batch batch() const { return Batch{inputs_.data(), labels_.data(), problem_.rows}; }

    const Problem& problem_;
    std::unique_ptr<Backend> backend_;
    Mlp mlp_;
    DeviceBuffer<float> parameters_, gradient_, inputs_;
    DeviceBuffer<std::int32_t> labels_;
};

struct NumericGradient {
    std::vector<float> values;
    std::vector<bool> skipped;  // the difference straddles a ReLU kink
    std::size_t skipped_count = 0;
};

NumericGradient central_differences(Harness& harness, const Problem& problem, const std::vector<float>& x,
                                    float h) {
    NumericGradient n;
    n.values.resize(x.size());
    n.skipped.resize(x.size());
    std::vector<bool> base, plus_pattern, minus_pattern;
    reference_loss(problem, x, &base);
    std::vector<float> probe = x;
    for (std::size_t i = 0; i < x.size(); ++i) {
        probe[i] = x[i] + h;
        const float plus = probe[i];
        const double f_plus = harness.loss(probe);
        reference_loss(problem, probe, &plus_pattern);
        probe[i] = x[i] - h;
        const float minus = probe[i];
        const double f_minus = harness.loss(probe);
        reference_loss(problem, probe, &minus_pattern);
        probe[i] = x[i];
        // Divide by the step the float parameters actually took, not by 2h.
        n.values[i] = float((f_plus - f_minus) / double(plus - minus));
        n.skipped[i] = plus_pattern != base || minus_pattern != base;
        n.skipped_count += n.skipped[i];
    }
    return n;
}

// Parameters where analytic and numeric derivatives disagree beyond the tolerance.
std::size_t mismatches(const std::vector<float>& analytic, const NumericGradient& numeric, double absolute,
                       double relative) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < analytic.size(); ++i) {
        if (numeric.skipped[i]) continue;
        const double a = analytic[i], n = numeric.values[i];
        if (std::fabs(a - n) > absolute + relative * std::max(std::fabs(a), std::fabs(n))) ++bad;
    }
    return bad;
}

std::vector<float> initial_parameters(const Mlp& mlp, std::uint64_t seed) {
    std::vector<float> x(mlp.num_parameters());
    mlp.initialize(x.data(), seed);
    // He initialization leaves the biases at zero; random biases exercise their gradient better.
    std::mt19937_64 rng(seed + 1);
    std::normal_distribution<float> gaussian(0.f, 0.3f);
    for (auto& v : x) v += gaussian(rng);
    return x;
}

constexpr float kStep = 1e-2f;
constexpr double kAbsolute = 2e-4, kRelative = 5e-3;

}  // namespace

TEST_CASE("Mlp layout and sizes") {
    auto backend = make_backend({"cpu", 1, 0});
    Mlp mlp(*backend, {5, 7, 4, 3});
    CHECK(mlp.num_parameters() == 5 * 7 + 7 + 7 * 4 + 4 + 4 * 3 + 3);
    CHECK(mlp.description() == "mlp 5-7-4-3");
    CHECK(mlp.layer_sizes() == std::vector<std::size_t>{5, 7, 4, 3});
    CHECK_THROWS_AS(Mlp(*backend, {5}), std::invalid_argument);
}

TEST_CASE("Mlp initialization is seeded: He weights, zero biases") {
    auto backend = make_backend({"cpu", 1, 0});
    Mlp mlp(*backend, {50, 40, 3});
    std::vector<float> a(mlp.num_parameters()), b(mlp.num_parameters()), c(mlp.num_parameters());
    mlp.initialize(a.data(), 11);
    mlp.initialize(b.data(), 11);
    mlp.initialize(c.data(), 12);
    CHECK(a == b);
    CHECK(a != c);
    // First layer: 2000 weights with variance 2 / 50, then 40 zero biases.
    double sum_of_squares = 0;
    for (std::size_t i = 0; i < 50 * 40; ++i) sum_of_squares += double(a[i]) * a[i];
    CHECK(sum_of_squares / 2000 == doctest::Approx(2.0 / 50).epsilon(0.15));
    for (std::size_t i = 50 * 40; i < 50 * 40 + 40; ++i) CHECK(a[i] == 0.f);
}

TEST_CASE("Mlp loss matches a reference forward pass in double") {
    const Problem problem = make_problem({5, 7, 4, 3}, 6, 2024);
    Harness harness(problem);
    const std::vector<float> x = initial_parameters(harness.mlp(), 3);
    const double expected = reference_loss(problem, x, nullptr);
    CHECK(harness.loss(x) == doctest::Approx(expected).epsilon(1e-5));
    std::vector<float> gradient;
    CHECK(harness.loss_and_gradient(x, gradient) == doctest::Approx(expected).epsilon(1e-5));
}

TEST_CASE("Mlp gradient matches central finite differences") {
    // Two shapes: several hidden layers, and a plain softmax regression (no hidden layer).
    const std::vector<std::vector<std::size_t>> shapes{{5, 7, 4, 3}, {6, 4}, {3, 9, 2}};
    for (const auto& sizes : shapes) {
        CAPTURE(sizes.size());
        CAPTURE(sizes.front());
        const Problem problem = make_problem(sizes, 6, 99 + sizes.size());
        Harness harness(problem);
        const std::vector<float> x = initial_parameters(harness.mlp(), 5);

        std::vector<float> analytic;
        harness.loss_and_gradient(x, analytic);
        const NumericGradient numeric = central_differences(harness, problem, x, kStep);

        // A kink is rare at this step size; if most differences straddled one the test would
        // prove nothing.
        CHECK(numeric.skipped_count * 10 <= x.size());
        CHECK(mismatches(analytic, numeric, kAbsolute, kRelative) == 0);

        double difference = 0, norm = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            if (numeric.skipped[i]) continue;
            difference += std::pow(double(analytic[i]) - numeric.values[i], 2);
            norm += std::pow(double(numeric.values[i]), 2);
        }
        CHECK(norm > 0);
        CHECK(std::sqrt(difference / norm) < 5e-3);
    }
}

TEST_CASE("the finite-difference check rejects a wrong gradient") {
    // The tolerance above must be tight enough to catch the usual backprop mistakes.
    const Problem problem = make_problem({5, 7, 4, 3}, 6, 2024);
    Harness harness(problem);
    const std::vector<float> x = initial_parameters(harness.mlp(), 3);
    std::vector<float> analytic;
    harness.loss_and_gradient(x, analytic);
    const NumericGradient numeric = central_differences(harness, problem, x, kStep);
    REQUIRE(mismatches(analytic, numeric, kAbsolute, kRelative) == 0);

    SUBCASE("first layer's weight gradient with the wrong sign") {
        std::vector<float> wrong = analytic;
        for (std::size_t i = 0; i < 5 * 7; ++i) wrong[i] = -wrong[i];
        CHECK(mismatches(wrong, numeric, kAbsolute, kRelative) > 0);
    }
    SUBCASE("sum over the batch instead of the mean") {
        std::vector<float> wrong = analytic;
        for (auto& g : wrong) g *= float(problem.rows);
        CHECK(mismatches(wrong, numeric, kAbsolute, kRelative) > 0);
    }
    SUBCASE("output layer's bias gradient missing") {
        std::vector<float> wrong = analytic;
        std::fill(wrong.end() - 3, wrong.end(), 0.f);
        CHECK(mismatches(wrong, numeric, kAbsolute, kRelative) > 0);
    }
    SUBCASE("hidden bias gradient off by ten percent") {
        std::vector<float> wrong = analytic;
        for (std::size_t i = 5 * 7; i < 5 * 7 + 7; ++i) wrong[i] *= 1.1f;
        CHECK(mismatches(wrong, numeric, kAbsolute, kRelative) > 0);
    }
}

TEST_CASE("evaluate_with_gradient overwrites the gradient buffer and is repeatable") {
    const Problem problem = make_problem({5, 7, 4, 3}, 6, 7);
    Harness harness(problem);
    const std::vector<float> x = initial_parameters(harness.mlp(), 8);
    std::vector<float> first, second;
    const double loss_first = harness.loss_and_gradient(x, first);
    harness.poison_gradient(123.f);
    const double loss_second = harness.loss_and_gradient(x, second);
    CHECK(loss_first == loss_second);
    CHECK(first == second);
}

