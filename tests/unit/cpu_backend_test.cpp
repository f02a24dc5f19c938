// The CPU backend's operations against plain loops (tests/backend_reference.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/backend.hpp"
#include "backend_reference.hpp"
#include "util/all_finite.hpp"
#include "util/errors.hpp"

namespace {

using namespace tether;
using namespace tether::testing;

std::unique_ptr<Backend> cpu(int threads = 1) { return make_backend({"cpu", threads, 0}); }

}  // namespace

TEST_CASE("make_backend picks the device it is asked for") {
    auto backend = cpu(2);
    CHECK(backend->kind() == DeviceKind::cpu);
    CHECK(backend->host_addressable());
    CHECK(backend->description().find("2 threads") != std::string::npos);
    CHECK(to_string(DeviceKind::cuda) == "cuda");
    CHECK_THROWS_WITH_AS(make_backend({"tpu", 1, 0}), doctest::Contains("\"tpu\""), ConfigError);
    if (cuda_device_count() == 0) {
        CHECK_THROWS_AS(make_backend({"cuda", 1, 0}), ConfigError);
        CHECK(make_backend({"auto", 1, 0})->kind() == DeviceKind::cpu);
    }
}

TEST_CASE("gemm in all four transpose combinations, with alpha and beta") {
    auto backend = cpu();
    const int m = 5, n = 7, k = 9;
    for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
            CAPTURE(ta);
            CAPTURE(tb);
            const auto a = random_vector(std::size_t(m) * k, 1), b = random_vector(std::size_t(k) * n, 2),
                       c = random_vector(std::size_t(m) * n, 3);
            auto da = to_backend(*backend, a), db = to_backend(*backend, b), dc = to_backend(*backend, c);
            backend->gemm(ta, tb, m, n, k, 0.7f, da.data(), db.data(), 0.3f, dc.data());
            CHECK(max_relative_error(to_host(dc), gemm_reference(ta, tb, m, n, k, 0.7f, a, b, 0.3f, c)) < 1e-5);
        }
}

TEST_CASE("vector algebra") {
    auto backend = cpu();
    const std::vector<float> x{1.f, -2.f, 3.f, 0.5f}, y{4.f, 5.f, -6.f, 1.f};
    auto dx = to_backend(*backend, x), dy = to_backend(*backend, y), out = to_backend(*backend, x);

    backend->axpy(dy.data(), dx.data(), 4, 2.f);
    CHECK(to_host(dy) == std::vector<float>{6.f, 1.f, 0.f, 2.f});
    backend->scale(dy.data(), 4, -0.5f);
    CHECK(to_host(dy) == std::vector<float>{-3.f, -0.5f, 0.f, -1.f});
    backend->difference(out.data(), dx.data(), dy.data(), 4);
    CHECK(to_host(out) == std::vector<float>{4.f, -1.5f, 3.f, 1.5f});
    CHECK(backend->sum_of_squares(dx.data(), 4) == doctest::Approx(1 + 4 + 9 + 0.25));
    backend->fill(out.data(), 4, 2.5f);
    CHECK(to_host(out) == std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f});
    backend->copy(out.data(), dx.data(), 4 * sizeof(float));
    CHECK(to_host(out) == x);

    CHECK(backend->all_finite(dx.data(), 4));
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()}) {
        std::vector<float> v = x;
        v[2] = bad;
        auto dv = to_backend(*backend, v);
        CHECK_FALSE(backend->all_finite(dv.data(), 4));
    }
}

TEST_CASE("a rule's vector operations over a whole parameter vector, in each aliasing a rule uses") {
    // The length of the default MLP plus a ragged tail: the vector loops' remainder runs too.
    auto backend = cpu(2);
    const std::size_t n = 235146 + 13;
    const auto a = random_vector(n, 4), b = random_vector(n, 5);
    std::vector<float> a_minus_b(n), a_minus_b_minus_b(n);
    for (std::size_t i = 0; i < n; ++i) {
        a_minus_b[i] = a[i] - b[i];
        a_minus_b_minus_b[i] = a_minus_b[i] - b[i];
    }
    auto da = to_backend(*backend, a), db = to_backend(*backend, b), out = to_backend(*backend, std::vector<float>(n, 7.f));
    backend->difference(out.data(), da.data(), db.data(), n);  // a fresh payload
    CHECK(to_host(out) == a_minus_b);
    // Into a buffer that starts 8 bytes off a 16-byte boundary: with n = 235159 the vector loop
    // then has a head of 2 and a tail of 1, and nothing before or after the range is written.
    auto shifted = to_backend(*backend, std::vector<float>(n + 3, 7.f));
    REQUIRE(reinterpret_cast<std::uintptr_t>(shifted.data()) % 16 == 0);
    backend->difference(shifted.data() + 2, da.data(), db.data(), n);
    const std::vector<float> around = to_host(shifted);
    CHECK(around[0] == 7.f);
    CHECK(around[1] == 7.f);
    CHECK(around.back() == 7.f);
    CHECK(std::vector<float>(around.begin() + 2, around.end() - 1) == a_minus_b);
    backend->difference(out.data(), out.data(), db.data(), n);  // out <- out - b
    CHECK(to_host(out) == a_minus_b_minus_b);
    auto b_again = to_backend(*backend, b);
    backend->difference(b_again.data(), da.data(), b_again.data(), n);  // out <- a - out
    CHECK(to_host(b_again) == a_minus_b);
    backend->scale(b_again.data(), n, 2.f);
    backend->axpy(b_again.data(), da.data(), n, -2.f);  // 2 (a - b) - 2 a = -2 b
    for (std::size_t i = 0; i < n; i += 997) CHECK(to_host(b_again)[i] == doctest::Approx(-2.f * b[i]));
}

TEST_CASE("the exchange's finiteness check finds one NaN or Inf anywhere in a long vector") {
    const std::size_t n = 235146 + 13;
    std::vector<float> v = random_vector(n, 6);
    v[0] = std::numeric_limits<float>::max();
    v[1] = -std::numeric_limits<float>::max();
    v[2] = std::numeric_limits<float>::denorm_min();
    CHECK(host::all_finite(v.data(), n));
    for (const std::size_t at : {std::size_t(0), std::size_t(16), n / 2 + 1, n - 1})
        for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity()}) {
            CAPTURE(at);
            CAPTURE(bad);
            std::vector<float> w = v;
            w[at] = bad;
            CHECK_FALSE(host::all_finite(w.data(), n));
            CHECK(host::all_finite(w.data(), at));  // the elements before it alone are finite
        }
}

TEST_CASE("add_bias, relu_backward, column_sums and argmax_rows") {
    auto backend = cpu();
    const int rows = 3, cols = 4;
    const std::vector<float> z{1.f, -2.f, 0.5f, 0.f, -1.f, 3.f, -0.5f, 2.f, 0.f, 0.f, 0.f, -4.f};
    const std::vector<float> bias{0.5f, 1.f, -1.f, 0.f};
    for (const bool relu : {false, true}) {
        CAPTURE(relu);
        auto dz = to_backend(*backend, z), db = to_backend(*backend, bias);
        backend->add_bias(dz.data(), db.data(), rows, cols, relu);
        std::vector<float> expected(z.size());
        for (int r = 0; r < rows; ++r)
            for (int j = 0; j < cols; ++j) {
                const float v = z[std::size_t(r) * cols + j] + bias[std::size_t(j)];
                expected[std::size_t(r) * cols + j] = relu ? std::max(v, 0.f) : v;
            }
        CHECK(to_host(dz) == expected);
    }

    auto delta = to_backend(*backend, std::vector<float>(12, 1.f)), activation = to_backend(*backend, z);
    backend->relu_backward(delta.data(), activation.data(), 12);
    const std::vector<float> delta_host = to_host(delta);
    for (std::size_t i = 0; i < z.size(); ++i) CHECK(delta_host[i] == (z[i] > 0.f ? 1.f : 0.f));

    // column_sums keeps a vector of ones: a larger call after a smaller one must regrow it.
    for (const int r : {3, 50}) {
        CAPTURE(r);
        const auto m = random_vector(std::size_t(r) * cols, 9);
        auto dm = to_backend(*backend, m);
        DeviceBuffer<float> sums(*backend, cols);
        backend->column_sums(sums.data(), dm.data(), r, cols);
        std::vector<float> expected(cols, 0.f);
        for (int i = 0; i < r; ++i)
            for (int j = 0; j < cols; ++j) expected[std::size_t(j)] += m[std::size_t(i) * cols + j];
        CHECK(max_relative_error(to_host(sums), expected) < 1e-5);
    }

    auto dz = to_backend(*backend, z);
    DeviceBuffer<std::int32_t> classes(*backend, rows);
    backend->argmax_rows(classes.data(), dz.data(), rows, cols);
    CHECK(to_host(classes) == std::vector<std::int32_t>{0, 1, 0});  // ties go to the first column
}

TEST_CASE("softmax_cross_entropy: mean loss and its gradient") {
    auto backend = cpu();
    const int rows = 5, cols = 4;
    auto logits = random_vector(std::size_t(rows) * cols, 4, 3.f);
    logits[0] = 80.f;  // large logits must not overflow
    const std::vector<std::int32_t> labels{0, 3, 1, 2, 3};
    std::vector<float> expected_gradient;
    const double expected = softmax_cross_entropy_reference(logits, labels, rows, cols, &expected_gradient);

    auto dl = to_backend(*backend, logits);
    auto dy = to_backend(*backend, labels);
    DeviceBuffer<float> gradient(*backend, logits.size());
    CHECK(backend->softmax_cross_entropy(dl.data(), dy.data(), rows, cols, gradient.data()) ==
          doctest::Approx(expected).epsilon(1e-5));
    CHECK(max_relative_error(to_host(gradient), expected_gradient) < 1e-6);
    CHECK(backend->softmax_cross_entropy(dl.data(), dy.data(), rows, cols, nullptr) ==
          doctest::Approx(expected).epsilon(1e-5));
    // Each row of the gradient sums to zero.
    const auto g = to_host(gradient);
    for (int r = 0; r < rows; ++r) {
        double sum = 0;
        for (int j = 0; j < cols; ++j) sum += g[std::size_t(r) * cols + j];
        CHECK(std::fabs(sum) < 1e-6);
    }
}
