// A CPU worker with several threads splits each layer of an MLP between them
// (train/layer_split.hpp). The split must not change what is learned: the loss and gradient
// are the whole batch's, every parameter is updated once, on the thread that owns it, and the
// threads flush denormals when the run does.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/float_mode.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "model/mlp.hpp"
#include "train/batch_split.hpp"
#include "train/layer_split.hpp"
#include "train/local_trainer.hpp"
#include "train/step_team.hpp"
#include "util/errors.hpp"

namespace {

using namespace tether;

// Loss and gradient of the MLP `sizes` on `rows` random rows, in one pass and split `threads` ways.
void check_same_gradient(const std::vector<std::size_t>& sizes, int threads, int rows) {
    CAPTURE(threads);
    CAPTURE(rows);
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    std::vector<float> inputs(std::size_t(rows) * sizes.front());
    for (auto& v : inputs) v = uniform(rng);
    std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
    for (auto& l : labels) l = std::int32_t(rng() % sizes.back());
    const Batch batch{inputs.data(), labels.data(), rows};

    auto backend = make_cpu_backend(1, true);
    Mlp whole(*backend, sizes);
    std::vector<float> parameters(whole.num_parameters()), expected(parameters.size());
    whole.initialize(parameters.data(), 5);
    for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i] += 0.01f * uniform(rng);  // nonzero biases too
    const double expected_loss = whole.evaluate_with_gradient(parameters.data(), batch, expected.data());

    LayerSplitMlp split(sizes, threads, true);
    CHECK(split.parts() == threads);
    // NaN first: a gradient entry the split leaves unwritten shows.
    std::vector<float> gradient(parameters.size(), std::nanf(""));
    const double loss = split.evaluate_with_gradient(parameters.data(), batch, gradient.data());
    CHECK(loss == doctest::Approx(expected_loss).epsilon(1e-5));
    double max_error = 0, max_value = 0;
    std::size_t unwritten = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        unwritten += !std::isfinite(gradient[i]);
        max_error = std::max(max_error, double(std::fabs(gradient[i] - expected[i])));
        max_value = std::max(max_value, double(std::fabs(expected[i])));
    }
    CHECK(unwritten == 0);
    CAPTURE(max_error);
    CHECK(max_value > 0);
    CHECK(max_error <= 1e-5 * max_value);
}

RunConfig config_with(const nlohmann::json& model, const nlohmann::json& training) {
    nlohmann::json document = {{"data", {{"source", "synthetic"}}}, {"model", model}, {"training", training}};
    return parse_config(document);
}

}  // namespace

TEST_CASE("an MLP split by layers gives the whole batch's loss and mean gradient") {
    check_same_gradient({784, 256, 128, 10}, 2, 64);  // the default model and batch
    check_same_gradient({20, 24, 12, 5}, 2, 67);
    check_same_gradient({20, 24, 12, 5}, 3, 67);      // blocks of unequal width
    check_same_gradient({30, 16, 4}, 2, 1);           // one hidden layer, one row
    check_same_gradient({9, 10, 9, 8, 7, 3}, 4, 33);  // four hidden layers
    check_same_gradient({3, 8, 8, 2}, 4, 10);         // fewer inputs than threads: a block with none
}

TEST_CASE("a layer split hands every parameter to the update once") {
    auto backend = make_cpu_backend(1, true);
    const std::vector<std::vector<std::size_t>> shapes{{12, 10, 6, 4}, {3, 8, 8, 2}, {20, 24, 12, 5}};
    for (const auto& sizes : shapes)
        for (int threads : {2, 3, 4}) {
            CAPTURE(sizes.size());
            CAPTURE(threads);
            LayerSplitMlp split(sizes, threads, true);
            Mlp shape(*backend, sizes);
            std::vector<float> parameters(shape.num_parameters(), 0.1f), gradient(parameters.size());
            std::vector<std::int32_t> labels(8, 1);
            std::vector<float> inputs(8 * sizes[0], 0.5f);
            split.compute(parameters.data(), Batch{inputs.data(), labels.data(), 8}, gradient.data(), nullptr);
            std::vector<int> updates(parameters.size(), 0);
            std::mutex mutex;
            split.finish(gradient.data(), [&](std::size_t begin, std::size_t end) {
                std::lock_guard<std::mutex> lock(mutex);
                for (std::size_t i = begin; i < end; ++i) ++updates[i];
            });
            std::size_t wrong = 0;
            for (int u : updates) wrong += u != 1;
            CHECK(wrong == 0);
        }
}

TEST_CASE("a trainer with 2 threads split by layers learns the same as with 1, on the same data") {
    SyntheticSpec spec;
    spec.features = 40;
    spec.classes = 4;
    spec.train_samples = 2000;
    spec.seed = 7;
    auto data = std::make_shared<Dataset>(*make_synthetic(spec).train);
    auto run = [&](int threads) {
        const RunConfig config = config_with({{"hidden_layers", {64, 64}}},
                                             {{"device", "cpu"}, {"threads", threads}, {"batch_size", 64},
                                              {"optimizer", {{"name", "adam"}, {"learning_rate", 0.01}}}});
        auto backend = make_cpu_backend(threads, true);
        LocalTrainer trainer(config, *backend, DatasetView::whole(data), 1);
        CHECK(trainer.device_description().find(threads == 1 ? "1 thread:" : "2 blocks of rows") != std::string::npos);
        double loss = 0;
        for (int i = 0; i < 60; ++i) loss = trainer.step();
        std::vector<float> x(trainer.num_parameters());
        trainer.backend().copy_to_host(x.data(), trainer.parameters(), trainer.num_parameters() * sizeof(float));
        return std::make_pair(x, loss);
    };
    const auto [one, one_loss] = run(1);
    const auto [two, two_loss] = run(2);
    double max_error = 0;
    for (std::size_t i = 0; i < one.size(); ++i) max_error = std::max(max_error, double(std::fabs(one[i] - two[i])));
    CAPTURE(max_error);
    CHECK(max_error < 1e-3);  // float rounding only, over 60 Adam steps
    CHECK(two_loss == doctest::Approx(one_loss).epsilon(1e-2));
}

TEST_CASE("the thread plan splits an MLP's layers by default, and row slices where it cannot") {
    const nlohmann::json two = {{"threads", 2}, {"batch_size", 64}};
    const RunConfig mlp = config_with({{"hidden_layers", {256, 128}}}, two);
    CHECK(plan_cpu_threads(mlp, 2, 1).layer_blocks == 2);
    CHECK(plan_cpu_threads(mlp, 2, 1).batch_slices == 1);
    CHECK(plan_cpu_threads(mlp, 2, 1).blas_threads == 1);
    // With the kernels OpenBLAS runs, which set the GEMMs' speed (OPENBLAS_CORETYPE).
    CHECK(plan_cpu_threads(mlp, 2, 1).describe() ==
          "2 threads: each layer's weights in 2 blocks of rows on as many threads, OpenBLAS 1 thread, " + blas_core() +
              " kernels");
    CHECK(blas_core() != "unknown");
    CHECK(plan_cpu_threads(mlp, 1, 1).layer_blocks == 1);
    // 8 threads would leave 16 of the 128 units each: too thin, so row slices.
    CHECK(plan_cpu_threads(mlp, 8, 1).layer_blocks == 1);
    CHECK(plan_cpu_threads(mlp, 8, 1).batch_slices == 4);
    CHECK(plan_cpu_threads(config_with({{"hidden_layers", {32}}}, two), 2, 1).layer_blocks == 1);
    const RunConfig rows = config_with({{"hidden_layers", {256, 128}}}, {{"thread_split", "rows"}});
    CHECK(plan_cpu_threads(rows, 2, 1).batch_slices == 2);
    CHECK(plan_cpu_threads(rows, 2, 1).layer_blocks == 1);
    const RunConfig forced = config_with({{"hidden_layers", {32}}}, {{"thread_split", "layers"}});
    CHECK(plan_cpu_threads(forced, 2, 1).layer_blocks == 2);
    // A model it cannot split is refused when the config is read, naming the key.
    CHECK_THROWS_WITH_AS(config_with({{"layers", {"dense 16", "relu", "dense 3"}}}, {{"thread_split", "layers"}}),
                         doctest::Contains("training.thread_split: \"layers\" splits the hidden layers"), ConfigError);
    CHECK_THROWS_WITH_AS(config_with({{"hidden_layers", nlohmann::json::array()}}, {{"thread_split", "layers"}}),
                         doctest::Contains("and it has none"), ConfigError);
    CHECK(plan_cpu_threads(config_with({{"layers", {"dense 16", "relu", "dense 3"}}}, two), 2, 1).batch_slices == 2);
    const RunConfig narrow = config_with({{"hidden_layers", {64, 1}}}, {{"thread_split", "layers"}});
    CHECK_THROWS_WITH_AS(plan_cpu_threads(narrow, 2, 1), doctest::Contains("the narrowest has 1 unit;"), ConfigError);
    CHECK_THROWS_WITH_AS(config_with({{"hidden_layers", {8}}}, {{"thread_split", "columns"}}),
                         doctest::Contains("training.thread_split"), ConfigError);
}

// Inputs of 1e-39 (subnormal): the first layer's weight gradient is x^T delta, ~1e-40 with
// IEEE subnormals and exactly 0 when the thread that runs the GEMM reads subnormals as 0.
// Each thread computes its own block of rows, so both halves show each thread's mode.
TEST_CASE("the layer split's threads flush denormals when the run does, and only then") {
    for (const bool flush : {true, false}) {
        CAPTURE(flush);
        std::thread([flush] {
            // Made on a thread in the other mode, which new threads inherit: the split's own
            // threads must still follow `flush`.
            set_flush_denormals(!flush);
            const std::vector<std::size_t> sizes{32, 8, 2};
            const int rows = 64;
            std::vector<float> inputs(std::size_t(rows) * 32, 1e-39f);
            std::vector<std::int32_t> labels(rows, 1);
            auto backend = make_cpu_backend(1, false);
            Mlp model(*backend, sizes);
            std::vector<float> parameters(model.num_parameters()), gradient(parameters.size());
            model.initialize(parameters.data(), 1);
            LayerSplitMlp split(sizes, 2, flush);
            set_flush_denormals(flush);  // the caller is a training thread: tether sets its mode
            // Many steps: the helper thread, new and maybe not yet running, takes its block in most.
            for (int step = 0; step < 50; ++step) {
                split.evaluate_with_gradient(parameters.data(), Batch{inputs.data(), labels.data(), rows}, gradient.data());
                for (int half = 0; half < 2; ++half) {
                    std::size_t nonzero = 0;
                    for (std::size_t i = std::size_t(half) * 16 * 8; i < std::size_t(half + 1) * 16 * 8; ++i)
                        nonzero += gradient[i] != 0.f;
                    if (flush ? nonzero != 0 : nonzero == 0) FAIL_CHECK("step " << step << ", block " << half << ": " << nonzero << " nonzero");
                }
            }
            set_flush_denormals(false);
        }).join();
    }
}

TEST_CASE("a step team's caller takes task 0 first and its helper task 1, so each keeps its data") {
    StepTeam team(2, nullptr);
    const auto caller = std::this_thread::get_id();
    std::atomic<int> task0_on_caller{0}, task1_off_caller{0};
    for (int i = 0; i < 200; ++i)
        team.run(2, [&](int t) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            const bool on_caller = std::this_thread::get_id() == caller;
            if (t == 0 && on_caller) ++task0_on_caller;
            if (t == 1 && !on_caller) ++task1_off_caller;
        });
    // The caller claims task 0 before anything else. The helper may sleep through a run now and
    // then on a busy machine, and the caller then does task 1 too; rarely, a helper that
    // finished task 1 sees the next run start as it looks for more, and takes that task 0.
    CHECK(task0_on_caller >= 190);
    CHECK(task1_off_caller > 0);
    CHECK_THROWS_AS(team.run(team.max_tasks() + 1, [](int) {}), std::invalid_argument);
}
