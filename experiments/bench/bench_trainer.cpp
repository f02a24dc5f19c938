// Training throughput of the sequential CPU trainer, and the GEMM-only bound for the same
// shapes. Prints one JSON object; experiments/bench/bench_sequential.py runs it beside PyTorch.
// One model trains through all repeats, as in a real run: with 938 steps a repeat is one epoch
// of Fashion-MNIST at batch 64, and trainer_runs is the per-epoch rate, so a slowdown as
// training goes on (denormals) shows; trainer_whole_run_samples_per_second is the whole run's.
//   tether-bench [--threads 1] [--batch 64] [--steps 938] [--repeats 10] [--gemm-repeats 3]
//                [--flush-denormals 1] [--data DIR] [--optimizer sgd|nesterov|adam] [--split auto|layers|rows]
//                [--layers "conv 32 3x3 pad 1;relu;maxpool 2;dense 10"]
// With --layers the model is that layer list (experiments/bench/bench_cnn.py) and the GEMM-only
// bound, which mirrors the MLP's GEMMs, is left out.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <omp.h>

#include "backend/cpu_backend.hpp"
#include "bench_args.hpp"
#include "config/config.hpp"
#include "data/load.hpp"
#include "train/batch_split.hpp"
#include "train/local_trainer.hpp"

using namespace tether;
using Clock = std::chrono::steady_clock;

// One layer's GEMM shapes: its inputs and outputs, as one thread computes them.
struct LayerShape {
    int inputs, outputs;
};

// The MLP's layers, whole, or as part `part` of `parts` computes them in a layer split
// (train/layer_split.hpp): its block of each layer's input rows, all of the outputs.
static std::vector<LayerShape> layer_shapes(const std::vector<int>& sizes, int part = 0, int parts = 1) {
    std::vector<LayerShape> shapes;
    for (std::size_t l = 0; l + 1 < sizes.size(); ++l)
        shapes.push_back({sizes[l] * (part + 1) / parts - sizes[l] * part / parts, sizes[l + 1]});
    return shapes;
}

// Samples/s of `steps` passes of the per-step GEMMs of `layers` at `rows` rows, on `backend`:
// forward, weight gradients, and the deltas of every layer but the first.
static double gemm_samples_per_second(Backend& backend, const std::vector<LayerShape>& layers, int rows, int steps) {
    std::vector<std::vector<float>> w, act, delta, dw;
    for (const LayerShape& s : layers) {
        w.emplace_back(std::size_t(s.inputs) * s.outputs, 0.01f);
        dw.emplace_back(std::size_t(s.inputs) * s.outputs);
        act.emplace_back(std::size_t(rows) * s.outputs, 0.5f);
        delta.emplace_back(std::size_t(rows) * s.outputs, 0.1f);
    }
    std::vector<float> input(std::size_t(rows) * layers[0].inputs, 0.3f);
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) {
        for (std::size_t l = 0; l < layers.size(); ++l)
            backend.gemm(false, false, rows, layers[l].outputs, layers[l].inputs, 1.f, l == 0 ? input.data() : act[l - 1].data(),
                         w[l].data(), 0.f, act[l].data());
        for (std::size_t l = layers.size(); l-- > 0;) {
            const float* x = l == 0 ? input.data() : act[l - 1].data();
            backend.gemm(true, false, layers[l].inputs, layers[l].outputs, rows, 1.f, x, delta[l].data(), 0.f, dw[l].data());
            if (l > 0)
                backend.gemm(false, true, rows, layers[l].inputs, layers[l].outputs, 1.f, delta[l].data(), w[l].data(), 0.f,
                             delta[l - 1].data());
        }
    }
    return double(steps) * rows / std::chrono::duration<double>(Clock::now() - t0).count();
}

// The same GEMMs on `threads` threads at once, thread t running the shapes of part t (its
// own buffers, no sync between them): samples/s of the slowest, which sets a step's pace.
static double parallel_gemm_samples_per_second(int threads, bool flush_denormals, int steps, int batch,
                                               const std::function<std::pair<std::vector<LayerShape>, int>(int part)>& shapes) {
    std::vector<double> rates(std::size_t(threads), 0.0);
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num();
        auto own = make_backend({"cpu", 1, 0, flush_denormals});
        const auto [layers, rows] = shapes(t);
        rates[std::size_t(t)] = gemm_samples_per_second(*own, layers, rows, steps) / rows * batch;
    }
    return *std::min_element(rates.begin(), rates.end());
}

static double median(std::vector<double> v) {
    if (v.empty()) return 0;  // --repeats 0: the GEMM bound alone
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
    int threads = 1, batch = 64, steps = 938, repeats = 10, gemm_repeats = 3, flush_denormals = 1;
    std::string data_dir = DataConfig{}.dir, optimizer = "adam", split = "auto";
    std::vector<std::string> layers;
    BenchArgs args(argc, argv, "tether-bench",
                   "[--threads 1] [--batch 64] [--steps 938] [--repeats 10] [--gemm-repeats 3] [--flush-denormals 1] "
                   "[--data DIR] [--optimizer sgd|nesterov|adam] [--split auto|layers|rows] "
                   "[--layers \"conv 32 3x3 pad 1;relu;maxpool 2;dense 10\"]");
    while (args.next()) {
        if (args.is("--threads")) threads = int(args.integer(1, 4096));
        else if (args.is("--batch")) batch = int(args.integer(1, 1 << 20));
        else if (args.is("--steps")) steps = int(args.integer(1, 1 << 30));
        else if (args.is("--repeats")) repeats = int(args.integer(0, 1 << 20));
        else if (args.is("--gemm-repeats")) gemm_repeats = int(args.integer(0, 1 << 20));
        else if (args.is("--flush-denormals")) flush_denormals = int(args.integer(0, 1));
        else if (args.is("--data")) data_dir = args.text();
        else if (args.is("--optimizer")) optimizer = args.word({"sgd", "nesterov", "adam"});
        else if (args.is("--split")) split = args.word({"auto", "layers", "rows"});
        else if (args.is("--layers")) layers = args.parts(';');
        else args.unknown();
    }
    nlohmann::json document = {{"data", {{"dir", data_dir}}},
                               {"training", {{"batch_size", batch}, {"device", "cpu"}, {"threads", threads},
                                             {"thread_split", split}, {"flush_denormals", flush_denormals != 0},
                                             {"optimizer", {{"name", optimizer}}}}}};
    if (!layers.empty()) document["model"] = {{"layers", layers}};
    const RunConfig config = parse_config(document);
    const CpuThreadPlan plan = use_cpu_threads(config, threads, 1);
    auto backend = make_backend({"cpu", threads, 0, flush_denormals != 0});
    const TrainTestSplit data = load_data(config.data, 1);
    LocalTrainer trainer(config, *backend, DatasetView::whole(data.train), 1);
    for (int i = 0; i < 50; ++i) trainer.step();  // warm-up: page in buffers, settle BLAS

    std::vector<double> trainer_rates;
    double trainer_seconds = 0;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < steps; ++i) trainer.step();
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        trainer_seconds += seconds;
        trainer_rates.push_back(double(steps) * batch / seconds);
    }

    if (!layers.empty()) {
        const nlohmann::json result = {{"threads", threads}, {"thread_plan", plan.describe()}, {"batch", batch}, {"optimizer", optimizer},
                                       {"steps", steps}, {"repeats", repeats}, {"model", trainer.model().description()},
                                       {"trainer_samples_per_second", median(trainer_rates)},
                                       {"trainer_whole_run_samples_per_second", double(steps) * batch * repeats / trainer_seconds},
                                       {"trainer_runs", trainer_rates}};
        std::printf("%s\n", result.dump().c_str());
        return 0;
    }
    // The GEMM-only bound: the same GEMMs the MLP issues per step (forward, weight gradients,
    // hidden deltas), alone, in the fastest of three ways `threads` threads can run them: one
    // GEMM call over the whole batch on OpenBLAS's threads; the batch in row slices, one thread
    // and one single-threaded GEMM stream each (train/batch_split.hpp); or each layer split in
    // blocks of input rows, one thread each (train/layer_split.hpp). The last two run without
    // the syncs and sums a trainer needs between them.
    const std::vector<int> sizes{int(data.train->features), 256, 128, int(data.train->classes)};
    std::vector<double> blas_rates, sliced_rates, split_rates;
    set_blas_threads(threads, flush_denormals != 0);
    for (int r = 0; r < gemm_repeats; ++r)
        blas_rates.push_back(gemm_samples_per_second(*backend, layer_shapes(sizes), batch, steps));
    if (threads > 1) {
        set_blas_threads(1, flush_denormals != 0);
        const int slices = std::min(threads, batch);
        for (int r = 0; r < gemm_repeats; ++r) {
            sliced_rates.push_back(parallel_gemm_samples_per_second(slices, flush_denormals != 0, steps, batch, [&](int s) {
                return std::make_pair(layer_shapes(sizes), batch * (s + 1) / slices - batch * s / slices);
            }));
            split_rates.push_back(parallel_gemm_samples_per_second(threads, flush_denormals != 0, steps, batch, [&](int t) {
                return std::make_pair(layer_shapes(sizes, t, threads), batch);
            }));
        }
    }
    const double gemm_bound = std::max({median(blas_rates), median(sliced_rates), median(split_rates)});
    const nlohmann::json result = {{"threads", threads}, {"thread_plan", plan.describe()},
                                   {"batch", batch},
                                   {"optimizer", optimizer},
                                   {"steps", steps},
                                   {"repeats", repeats},
                                   {"flush_denormals", flush_denormals != 0},
                                   {"trainer_samples_per_second", median(trainer_rates)},
                                   {"trainer_whole_run_samples_per_second", trainer_seconds > 0 ? double(steps) * batch * repeats / trainer_seconds : 0.0},
                                   {"gemm_only_samples_per_second", gemm_bound},
                                   {"gemm_only_one_call_samples_per_second", median(blas_rates)},
                                   {"gemm_only_row_slices_samples_per_second", median(sliced_rates)},
                                   {"gemm_only_layer_blocks_samples_per_second", median(split_rates)},
                                   {"trainer_runs", trainer_rates},
                                   {"gemm_runs", blas_rates}};
    std::printf("%s\n", result.dump().c_str());
    return 0;
}
