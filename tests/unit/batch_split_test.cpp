// A CPU worker with several threads splits each minibatch into row slices, one thread and one
// model replica each (train/batch_split.hpp). The split must not change what is learned: the
// sliced gradient is the whole batch's mean gradient, and the slice threads flush denormals
// like every other thread tether computes on.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/float_mode.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "train/batch_split.hpp"
#include "train/local_trainer.hpp"
#include "train/step_team.hpp"

namespace {

using namespace tether;

RunConfig config_with(const nlohmann::json& model, bool flush = true) {
    nlohmann::json document = {{"data", {{"source", "synthetic"}}},
                               {"model", model},
                               {"training", {{"device", "cpu"}, {"threads", 1}, {"flush_denormals", flush}}}};
    return parse_config(document);
}

struct Problem {
    std::shared_ptr<Dataset> data;
    std::vector<std::int32_t> labels;
    int rows;
};

Problem problem(std::size_t features, int classes, int rows, std::uint64_t seed) {
    SyntheticSpec spec;
    spec.features = features;
    spec.classes = classes;
    spec.train_samples = std::size_t(rows);
    spec.seed = seed;
    auto split = make_synthetic(spec);
    auto data = std::make_shared<Dataset>(*split.train);
    return {data, std::vector<std::int32_t>(data->labels.begin(), data->labels.end()), rows};
}

// Loss and gradient of the whole batch in one pass, and in `slices` row slices.
void check_same_gradient(const RunConfig& config, const Problem& p, int slices) {
    auto backend = make_cpu_backend(1, true);
    auto whole = make_model(config, *backend, *p.data);
    std::vector<float> parameters(whole->num_parameters()), expected(parameters.size()), sliced(parameters.size());
    whole->initialize(parameters.data(), 3);
    const Batch batch{p.data->images.data(), p.labels.data(), p.rows};
    const double expected_loss = whole->evaluate_with_gradient(parameters.data(), batch, expected.data());

    SlicedGradient split(config, *p.data, slices, 0, true);
    CHECK(split.slices() == slices);
    const double loss = split.evaluate_with_gradient(parameters.data(), batch, sliced.data());
    CHECK(loss == doctest::Approx(expected_loss).epsilon(1e-5));
    double max_error = 0, max_value = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        max_error = std::max(max_error, double(std::fabs(sliced[i] - expected[i])));
        max_value = std::max(max_value, double(std::fabs(expected[i])));
    }
    CAPTURE(max_error);
    CHECK(max_value > 0);
    CHECK(max_error <= 1e-5 * max_value);
}

}  // namespace

TEST_CASE("the thread plan splits minibatches, never below 16 rows a slice, and keeps OpenBLAS to one thread then") {
    CHECK(plan_cpu_threads(1, 64, 1).batch_slices == 1);
    CHECK(plan_cpu_threads(1, 64, 1).blas_threads == 1);
    CHECK(plan_cpu_threads(2, 64, 1).batch_slices == 2);
    CHECK(plan_cpu_threads(2, 64, 1).blas_threads == 1);
    CHECK(plan_cpu_threads(8, 64, 1).batch_slices == 4);  // 16 rows each
    // Too few rows to split: the threads go to OpenBLAS instead, unless workers share it.
    CHECK(plan_cpu_threads(4, 16, 1).batch_slices == 1);
    CHECK(plan_cpu_threads(4, 16, 1).blas_threads == 4);
    CHECK(plan_cpu_threads(4, 16, 3).blas_threads == 1);
    CHECK(plan_cpu_threads(0, 64, 1).threads == 1);
    CHECK(plan_cpu_threads(2, 64, 1).describe() ==
          "2 threads: each minibatch in 2 row slices on as many threads, OpenBLAS 1 thread, " + blas_core() + " kernels");
}

TEST_CASE("a minibatch in row slices gives the whole batch's loss and mean gradient (MLP)") {
    const Problem p = problem(20, 5, 67, 11);  // 67 rows: slices of unequal size
    const RunConfig config = config_with({{"hidden_layers", {24, 12}}});
    for (int slices : {2, 3, 4}) {
        CAPTURE(slices);
        check_same_gradient(config, p, slices);
    }
}

TEST_CASE("a minibatch in row slices gives the whole batch's loss and mean gradient (convolutional layers)") {
    Problem p = problem(64, 3, 40, 5);
    p.data->channels = 1, p.data->height = 8, p.data->width = 8;  // the 64 features as a 1x8x8 image
    const RunConfig config = config_with({{"layers", {"conv 4 3x3 pad 1", "relu", "maxpool 2", "layernorm", "dense 3"}}});
    check_same_gradient(config, p, 2);
}

TEST_CASE("a trainer with 2 threads learns the same as with 1, on the same data") {
    const Problem p = problem(16, 4, 2000, 7);
    auto run = [&](int threads) {
        nlohmann::json document = {{"data", {{"source", "synthetic"}}},
                                   {"model", {{"hidden_layers", {32}}}},
                                   {"training", {{"device", "cpu"}, {"threads", threads}, {"batch_size", 64},
                                                 {"optimizer", {{"name", "sgd"}, {"learning_rate", 0.1}}}}}};
        const RunConfig config = parse_config(document);
        auto backend = make_cpu_backend(threads, true);
        LocalTrainer trainer(config, *backend, DatasetView::whole(p.data), 1);
        CHECK(trainer.device_description().find(threads == 1 ? "1 thread:" : "2 row slices") != std::string::npos);
        for (int i = 0; i < 60; ++i) trainer.step();
        std::vector<float> x(trainer.num_parameters());
        trainer.backend().copy_to_host(x.data(), trainer.parameters(), trainer.num_parameters() * sizeof(float));
        return x;
    };
    const std::vector<float> one = run(1), two = run(2);
    double max_error = 0;
    for (std::size_t i = 0; i < one.size(); ++i) max_error = std::max(max_error, double(std::fabs(one[i] - two[i])));
    CAPTURE(max_error);
    CHECK(max_error < 1e-4);  // float rounding only, over 60 SGD steps
}

// Inputs of 1e-39 (subnormal): the first layer's weight gradient is x^T delta, ~1e-40 with
// IEEE subnormals and exactly 0 when the thread that runs the GEMM reads subnormals as 0.
TEST_CASE("the slice threads flush denormals when the run does, and only then") {
    for (const bool flush : {true, false}) {
        CAPTURE(flush);
        std::thread([flush] {
            set_flush_denormals(false);  // earlier cases set it on the main thread, which this one inherits
            const RunConfig config = config_with({{"hidden_layers", {8}}}, flush);
            auto data = std::make_shared<Dataset>();
            data->features = 32;
            data->classes = 2;
            const int rows = 64;
            data->images.assign(std::size_t(rows) * data->features, 1e-39f);
            data->labels.assign(rows, 1);
            std::vector<std::int32_t> labels(rows, 1);
            SlicedGradient split(config, *data, 2, 0, flush);
            auto backend = make_cpu_backend(1, false);
            auto model = make_model(config, *backend, *data);
            std::vector<float> parameters(model->num_parameters()), gradient(parameters.size());
            model->initialize(parameters.data(), 1);
            split.evaluate_with_gradient(parameters.data(), Batch{data->images.data(), labels.data(), rows}, gradient.data());
            std::size_t nonzero = 0;
            for (std::size_t i = 0; i < std::size_t(32 * 8); ++i) nonzero += gradient[i] != 0.f;
            if (flush) CHECK(nonzero == 0);
            else CHECK(nonzero > 0);
        }).join();
    }
}

TEST_CASE("a step team runs every task once per run, also after its helpers fell asleep, and passes errors on") {
    std::atomic<int> helpers_started{0};
    StepTeam team(3, [&] { ++helpers_started; });
    CHECK(team.members() == 3);
    std::vector<std::atomic<int>> runs(5);
    for (int i = 0; i < 2000; ++i) team.run(5, [&](int t) { ++runs[std::size_t(t)]; });
    for (auto& r : runs) CHECK(r == 2000);
    // The caller may have done every task so far; the helpers still start, on their own.
    for (int i = 0; i < 5000 && helpers_started < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(helpers_started == 2);
    // Long past the spin: the helpers sleep, and the caller alone could do everything; either way
    // every task runs exactly once.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    team.run(5, [&](int t) { ++runs[std::size_t(t)]; });
    for (auto& r : runs) CHECK(r == 2001);
    // A task's exception reaches the caller after every task finished; the team goes on.
    std::atomic<int> finished{0};
    CHECK_THROWS_WITH_AS(team.run(4, [&](int t) {
        if (t == 2) throw std::runtime_error("task 2 failed");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ++finished;
    }), "task 2 failed", std::runtime_error);
    CHECK(finished == 3);
    team.run(5, [&](int t) { ++runs[std::size_t(t)]; });
    for (auto& r : runs) CHECK(r == 2002);
}

TEST_CASE("the helpers take their share of a step's tasks on an idle machine") {
    StepTeam team(2, nullptr);
    std::atomic<int> off_caller{0};
    const auto caller = std::this_thread::get_id();
    for (int i = 0; i < 200; ++i)
        team.run(2, [&](int) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));  // long enough for the helper to claim one
            if (std::this_thread::get_id() != caller) ++off_caller;
        });
    CHECK(off_caller > 0);
}

// training.optimizer.warmup_epochs: over the first epoch of local steps the learning rate
// ramps linearly, so SGD's first step moves x by 1 / steps_per_epoch of a plain first step.
TEST_CASE("a warm-up ramps the learning rate over the first local steps, then leaves it as it is") {
    const Problem p = problem(16, 4, 640, 3);  // batch 64: 10 steps per epoch
    auto train = [&](double warmup_epochs, int steps) {
        nlohmann::json document = {{"data", {{"source", "synthetic"}}},
                                   {"model", {{"hidden_layers", {8}}}},
                                   {"training", {{"device", "cpu"}, {"threads", 1}, {"batch_size", 64},
                                                 {"optimizer", {{"name", "sgd"}, {"learning_rate", 0.1},
                                                                {"warmup_epochs", warmup_epochs}}}}}};
        auto backend = make_cpu_backend(1, true);
        LocalTrainer trainer(parse_config(document), *backend, DatasetView::whole(p.data), 1);
        std::vector<float> before(trainer.num_parameters()), after(before.size());
        for (int i = 0; i + 1 < steps; ++i) trainer.step();
        trainer.backend().copy_to_host(before.data(), trainer.parameters(), trainer.num_parameters() * sizeof(float));
        trainer.step();
        trainer.backend().copy_to_host(after.data(), trainer.parameters(), trainer.num_parameters() * sizeof(float));
        std::vector<double> moved(before.size());
        for (std::size_t i = 0; i < before.size(); ++i) moved[i] = double(after[i]) - before[i];
        return moved;
    };
    const auto plain = train(0, 1), ramped = train(1, 1);
    double largest = 0;
    for (std::size_t i = 0; i < plain.size(); ++i) {
        // float32 rounding of x - step - x leaves ~1e-8: 1% is far from the 10x being checked.
        CHECK(ramped[i] == doctest::Approx(plain[i] / 10).epsilon(1e-2).scale(1e-6));
        largest = std::max(largest, std::fabs(plain[i]));
    }
    CHECK(largest > 0);
    // Step 11 is past the ramp: the same step as without it, from wherever x is by then (the same
    // batch, since both shuffle alike), so only its size is compared: it must not be scaled down.
    const auto late_plain = train(0, 11), late_ramped = train(1, 11);
    double plain_norm = 0, ramped_norm = 0;
    for (std::size_t i = 0; i < late_plain.size(); ++i) plain_norm += late_plain[i] * late_plain[i], ramped_norm += late_ramped[i] * late_ramped[i];
    CHECK(std::sqrt(ramped_norm) > 0.5 * std::sqrt(plain_norm));
}
