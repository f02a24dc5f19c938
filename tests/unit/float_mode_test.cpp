// Denormal floats are flushed on the threads tether owns (backend/float_mode.hpp), and only
// there: a subnormal that reaches a tether kernel on a tether thread comes out as zero, while the
// embedding API leaves its caller's floating-point mode exactly as it found it. Each case runs on
// a fresh thread created by the test's main thread, which never flushes: so it starts without.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/float_mode.hpp"

namespace {

using namespace tether;

constexpr float kSubnormal = 1e-39f;  // below FLT_MIN = 1.18e-38
// Long enough for the CPU backend to split the loop over its OpenMP team (65,536+ elements),
// so the team's threads are checked too, not only the calling one.
constexpr std::size_t kLong = 200000;

template <typename F>
void on_fresh_thread(F f) {
    std::thread t(f);
    t.join();
}

std::size_t count_nonzero(const float* x, std::size_t n) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) count += x[i] != 0.f;
    return count;
}

}  // namespace

TEST_CASE("a CPU backend made to flush denormals flushes them on its thread and its OpenMP team") {
    on_fresh_thread([] {
        REQUIRE_FALSE(flush_denormals_enabled());  // a new thread starts without
        auto backend = make_backend({"cpu", 2, 0, /*flush_denormals=*/true});
        CHECK(flush_denormals_enabled());
        CHECK(backend->description().find("denormals flushed") != std::string::npos);
        // Denormals-are-zero: a subnormal input reads as 0.
        std::vector<float> x(kLong, kSubnormal);
        backend->scale(x.data(), x.size(), 1.f);
        CHECK(count_nonzero(x.data(), x.size()) == 0);
        // Flush-to-zero: a result that would be subnormal is 0.
        std::vector<float> y(kLong, 0.f), tiny(kLong, 1e-30f);
        backend->axpy(y.data(), tiny.data(), y.size(), 1e-10f);
        CHECK(count_nonzero(y.data(), y.size()) == 0);
    });
}

TEST_CASE("with flush_denormals off, the same kernels keep subnormals (the check above can fail)") {
    on_fresh_thread([] {
        auto backend = make_backend({"cpu", 2, 0, /*flush_denormals=*/false});
        CHECK_FALSE(flush_denormals_enabled());
        std::vector<float> x(kLong, kSubnormal);
        backend->scale(x.data(), x.size(), 1.f);
        CHECK(count_nonzero(x.data(), x.size()) == kLong);
    });
}

TEST_CASE("the embedding API flushes on the center's thread and leaves the caller's mode as it was") {
    for (const bool flush : {true, false}) {
        CAPTURE(flush);
        on_fresh_thread([flush] {
            const unsigned long before = floating_point_control();
            ServiceOptions options;
            options.strategy = R"({"name": "aeasgd", "moving_rate": 0.5, "communication_window": 1})";
            options.flush_denormals = flush;
            auto center = CenterService::start(std::vector<float>(8, 0.f), options);
            // The center computes e = 0.5 (x_i - x~) = 0.5 x_i: with x_i subnormal, a flushing
            // center reads x_i as 0 and x~ stays exactly 0.
            std::vector<float> x(8, kSubnormal);
            auto worker = center->connect_worker(x.data(), x.size());
            std::fill(x.begin(), x.end(), kSubnormal);  // the join set x <- x~ = 0
            CHECK(worker->step(1));
            worker->finish();
            const std::vector<float> trained = center->wait();
            CHECK(count_nonzero(trained.data(), trained.size()) == (flush ? 0u : trained.size()));
            CHECK(floating_point_control() == before);
        });
    }
}

// The CPU backend relies on this: OpenMP threads created after the mode is set inherit it.
TEST_CASE("set_flush_denormals sets and clears both modes on the calling thread; new threads inherit it") {
    on_fresh_thread([] {
        set_flush_denormals(true);
        CHECK(flush_denormals_enabled());
        on_fresh_thread([] { CHECK(flush_denormals_enabled()); });
        set_flush_denormals(false);
        CHECK_FALSE(flush_denormals_enabled());
        on_fresh_thread([] { CHECK_FALSE(flush_denormals_enabled()); });
    });
}

// OpenBLAS's own threads start when the library loads, with the mode of that moment; a GEMM
// big enough to be split over them must flush on every one. DAZ reads the subnormal A as 0,
// so C = A B is exactly 0 everywhere; any thread that did not flush leaves 5e-27s behind.
TEST_CASE("a GEMM split over OpenBLAS's threads flushes denormals on all of them") {
    on_fresh_thread([] {
        set_blas_threads(2, /*flush_denormals=*/true);
        auto backend = make_backend({"cpu", 2, 0, /*flush_denormals=*/true});
        const int n = 256;
        std::vector<float> a(std::size_t(n) * n, kSubnormal), b(std::size_t(n) * n, 1e10f / n), c(std::size_t(n) * n, 1.f);
        backend->gemm(false, false, n, n, n, 1.f, a.data(), b.data(), 0.f, c.data());
        CHECK(count_nonzero(c.data(), c.size()) == 0);
    });
}
