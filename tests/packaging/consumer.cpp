// An out-of-tree program built against an installed tether, by tests/packaging/check_install.sh
// (once with pkg-config, once with CMake, once with Meson). It uses only the public headers:
// two workers on their own threads train a 4-element vector through a center over inproc://,
// with freed memory kept mapped first.
// Worker w adds w + 1 to every element before each of its 3 steps.
// - `averaging` with communication_window 1 replaces both workers' vectors with their mean
//   after every step, so x~ grows by (1 + 2) / 2 = 1.5 per round and ends at 4.5 everywhere.
// - `damped-sum`, a strategy of this program's own (damped_sum_strategy.hpp, registered by
//   name), adds every step's update scaled by 1 / 2 to x~: 9 / 2 = 4.5 again, in any order.
// - `damped-downpour`, damped-sum's center paired with a built-in worker half (DOWNPOUR's,
//   <tether/worker_rules.hpp>) as the built-ins pair theirs: 4.5 as well.
// <tether/schedule.hpp> installs and links: a cosine schedule over 100 steps is at 1/2 at step 50.
// `consumer cuda-error`, on a machine without a GPU, asks for a worker on CUDA memory and
// prints the error tether gives (what libtether says when libtether-cuda.so is or is not there).
#include <tether/schedule.hpp>
#include <tether/tether.hpp>

#include "damped_sum_strategy.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

static_assert(TETHER_VERSION_MAJOR >= 0 && TETHER_VERSION_MINOR >= 0 && TETHER_VERSION_PATCH >= 0,
              "tether/version.hpp defines the version macros");

static int print_cuda_error() {
    tether::ServiceOptions options;
    options.join_timeout_ms = 1000;
    auto center = tether::CenterService::start(std::vector<float>(4, 0.f), options);
    float unused[4] = {};
    try {
        center->connect_worker(unused, 4, tether::Memory::cuda);
    } catch (const std::exception& e) {
        std::printf("cuda-error: %s\n", e.what());
        return 0;
    }
    std::printf("FAIL: a worker on CUDA memory was made on a machine without a GPU\n");
    return 1;
}

// Two workers, 3 steps each, under `strategy`; returns x~ at the end.
static std::vector<float> train_two_workers(const char* strategy) {
    constexpr int kWorkers = 2, kSteps = 3;
    tether::ServiceOptions options;
    options.strategy = strategy;
    options.workers = kWorkers;
    auto center = tether::CenterService::start(std::vector<float>(4, 0.f), options);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w)
        threads.emplace_back([&center, w] {
            std::vector<float> params(4);
            auto worker = center->connect_worker(params.data(), params.size());
            for (int s = 0; s < kSteps; ++s) {
                for (float& p : params) p += float(w + 1);
                worker->step(1);
            }
            worker->finish();
        });
    for (auto& t : threads) t.join();
    return center->wait();
}

// A center of one's own behind a built-in worker half: the composition the built-ins are made of.
using DampedDownpour = tether::RulePair<tether::PullPushWorker, damped_sum::Center>;

static std::shared_ptr<const tether::Strategy> make_damped_downpour(tether::StrategyOptions& options,
                                                                    const tether::StrategyContext&) {
    return std::make_shared<DampedDownpour>(options.communication_window(1), tether::Landing{}, damped_sum::Center(0.5f));
}

static bool all_equal(const char* strategy, const std::vector<float>& x, float expected) {
    std::printf("%s: x~ =", strategy);
    for (float v : x) std::printf(" %g", v);
    std::printf("\n");
    for (float v : x)
        if (std::fabs(v - expected) > 1e-5f) {
            std::printf("FAIL: expected every element of x~ to be %g\n", expected);
            return false;
        }
    return true;
}

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "cuda-error") == 0) return print_cuda_error();
    std::printf("tether %s: averaging, then a strategy of its own\n", TETHER_VERSION_STRING);
    // As a process serving workers should (docs/embedding.md); glibc has the settings.
    if (!tether::keep_freed_memory_mapped()) {
        std::printf("FAIL: keep_freed_memory_mapped() changed nothing on glibc\n");
        return 1;
    }
    if (!all_equal("averaging", train_two_workers(R"({"name": "averaging", "communication_window": 1})"), 4.5f))
        return 1;
    damped_sum::register_it();
    if (!all_equal("damped-sum", train_two_workers(R"({"name": "damped-sum"})"), 4.5f)) return 1;
    // Its options are read as strictly as a built-in's.
    try {
        train_two_workers(R"({"name": "damped-sum", "scael": 0.5})");
        std::printf("FAIL: a misspelt option was accepted\n");
        return 1;
    } catch (const tether::ConfigError& e) {
        std::printf("damped-sum with \"scael\": %s\n", e.what());
        if (!std::strstr(e.what(), "did you mean ServiceOptions.strategy.scale")) return 1;
    }
    tether::register_strategy("damped-downpour", "damped-sum's center, DOWNPOUR's worker", make_damped_downpour);
    if (!all_equal("damped-downpour", train_two_workers(R"({"name": "damped-downpour"})"), 4.5f)) return 1;
    const tether::LearningRateSchedule schedule(R"({"name": "cosine"})", 100);
    std::printf("cosine schedule at step 50 of 100: %g\n", schedule.scale(50));
    if (std::fabs(schedule.scale(50) - 0.5) > 1e-9) return 1;
    std::printf("OK\n");
    return 0;
}
