// GPU figures: what a worker on the CUDA backend costs. Prints one JSON object;
// experiments/bench/bench_gpu.py runs it beside PyTorch on the same GPU.
//   - training: one LocalTrainer on `device: cuda` per batch size, trained for the whole run
//     (per-epoch samples/s, so a slowdown shows), then its test accuracy;
//   - vector kernels: the element-wise operations the optimizers and strategies run, in GB/s
//     (bytes each must read and write once), beside a device-to-device copy of the same vector;
//   - exchange: what one window's transfers cost a GPU worker (parameters down to the host,
//     the reply up), for the MLP's parameter count.
//   tether-bench-gpu [--batches 64,512] [--epochs 5] [--data DIR] [--device N] [--tf32 0|1]
//                    [--layers "conv 32 3x3 pad 1;relu;maxpool 2;dense 10"] [--vector-floats 67108864 (0: none)]
// Exits 77 (skip) when no GPU is usable, as the CUDA tests do.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "bench_args.hpp"
#include "config/config.hpp"
#include "data/load.hpp"
#include "train/evaluator.hpp"
#include "train/local_trainer.hpp"

using namespace tether;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

static double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Seconds per call of `op` on `backend`: the median of 5 timed batches of `calls` calls, each
// batch ended by a synchronize so that the GPU's work, not the launches, is what is timed.
static double seconds_per_call(Backend& backend, int calls, const std::function<void()>& op) {
    for (int i = 0; i < 3; ++i) op();
    backend.synchronize();
    std::vector<double> per_call;
    for (int r = 0; r < 5; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < calls; ++i) op();
        backend.synchronize();
        per_call.push_back(seconds_since(t0) / calls);
    }
    return median(per_call);
}

// GB/s of each vector operation on `n` floats, and its ratio to a device-to-device copy.
static json vector_kernels(Backend& backend, std::size_t n) {
    DeviceBuffer<float> x(backend, n), m(backend, n), v(backend, n), g(backend, n), out(backend, n);
    std::vector<float> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = 1e-3f * float(int(i % 2001) - 1000);  // finite, not zero
    for (DeviceBuffer<float>* b : {&x, &m, &g, &out}) b->upload(host.data(), n);
    backend.fill(v.data(), n, 1e-4f);
    // Few calls on big vectors (each moves hundreds of MB); many on small ones, whose time is
    // mostly the launch.
    const int calls = n >= (std::size_t(1) << 24) ? 20 : 2000;
    struct Op {
        const char* name;
        double bytes_per_float;  // read once + written once
        std::function<void()> run;
    };
    const std::vector<Op> ops = {
        {"copy", 8, [&] { backend.copy(out.data(), x.data(), n * sizeof(float)); }},
        {"fill", 4, [&] { backend.fill(out.data(), n, 0.5f); }},
        {"scale", 8, [&] { backend.scale(out.data(), n, 0.999f); }},
        {"axpy", 12, [&] { backend.axpy(out.data(), x.data(), n, 1e-3f); }},
        {"difference", 12, [&] { backend.difference(out.data(), x.data(), g.data(), n); }},
        {"sgd_step", 12, [&] { backend.sgd_step(out.data(), g.data(), n, 1e-6f); }},
        {"adam_step", 28, [&] { backend.adam_step(out.data(), m.data(), v.data(), g.data(), n, 1e-6f, 0.9f, 0.999f, 1e-8f, 0.5f, 0.5f); }},
        {"sum_of_squares", 4, [&] { (void)backend.sum_of_squares(x.data(), n); }},
        {"all_finite", 4, [&] { (void)backend.all_finite(x.data(), n); }},
    };
    json result = json::object();
    double copy_rate = 0;
    for (const Op& op : ops) {
        const double seconds = seconds_per_call(backend, calls, op.run);
        const double rate = op.bytes_per_float * double(n) / seconds / 1e9;
        if (copy_rate == 0) copy_rate = rate;
        result[op.name] = {{"microseconds", seconds * 1e6}, {"gb_per_second", rate}, {"of_copy", rate / copy_rate}};
    }
    return result;
}

// One window's transfers for a worker on the GPU: its parameters down to a host buffer and
// the reply up, in pageable memory (a received ZeroMQ frame, where the reply lands) and in
// page-locked memory (the worker's own messages, Backend::pin_host).
static json exchange_transfers(Backend& backend, std::size_t n) {
    DeviceBuffer<float> x(backend, n);
    std::vector<float> host(n, 0.25f);
    x.upload(host.data(), n);
    const double bytes = double(n) * sizeof(float);
    json result = {{"floats", n}};
    auto time_both = [&](const std::string& memory) {
        const double down = seconds_per_call(backend, 200, [&] { backend.copy_to_host(host.data(), x.data(), n * sizeof(float)); });
        const double up = seconds_per_call(backend, 200, [&] { backend.copy_from_host(x.data(), host.data(), n * sizeof(float)); });
        result[memory] = {{"to_host_microseconds", down * 1e6},
                          {"to_host_gb_per_second", bytes / down / 1e9},
                          {"to_device_microseconds", up * 1e6},
                          {"to_device_gb_per_second", bytes / up / 1e9}};
    };
    time_both("pageable");
    if (const std::shared_ptr<void> pin = backend.pin_host(host.data(), n * sizeof(float))) time_both("pinned");
    return result;
}

static json train(const std::string& data_dir, const std::vector<std::string>& layers, int device, int batch, int epochs,
                  bool tf32) {
    json document = {{"data", {{"dir", data_dir}}},
                     {"training", {{"batch_size", batch}, {"device", "cuda"}, {"epochs", epochs}, {"tf32", tf32},
                                   {"optimizer", {{"name", "adam"}}}}}};
    if (!layers.empty()) document["model"] = {{"layers", layers}};
    const RunConfig config = parse_config(document);
    BackendOptions options{"cuda", 1, device, false};
    options.tf32 = config.training.tf32;
    auto backend = make_backend(options);
    const TrainTestSplit data = load_data(config.data, 1);
    LocalTrainer trainer(config, *backend, DatasetView::whole(data.train), 1);
    for (int i = 0; i < 20; ++i) trainer.step();  // warm-up: cuBLAS handles, kernel loads
    backend->synchronize();
    const std::size_t steps = trainer.steps_per_epoch();
    std::vector<double> epoch_rates;
    double seconds = 0;
    const std::size_t first = trainer.samples_seen();
    for (int e = 0; e < epochs; ++e) {
        const std::size_t before = trainer.samples_seen();
        const auto t0 = Clock::now();
        for (std::size_t s = 0; s < steps; ++s) trainer.step();
        backend->synchronize();
        const double epoch_seconds = seconds_since(t0);
        seconds += epoch_seconds;
        epoch_rates.push_back(double(trainer.samples_seen() - before) / epoch_seconds);
    }
    Evaluator evaluator(config, *backend, data.test, 0);
    const Evaluation test = evaluator.evaluate(trainer.parameters());
    const double slowest = *std::min_element(epoch_rates.begin(), epoch_rates.end());
    const double fastest = *std::max_element(epoch_rates.begin(), epoch_rates.end());
    return {{"batch", batch},
            {"model", trainer.model().description()},
            {"parameters", trainer.num_parameters()},
            {"epochs", epochs},
            {"samples_per_second", double(trainer.samples_seen() - first) / seconds},  // the last batch of a pass is short
            {"epoch_samples_per_second", epoch_rates},
            {"slowest_over_fastest", slowest / fastest},
            {"test_accuracy", test.accuracy},
            {"device", trainer.device_description()}};
}

int main(int argc, char** argv) {
    std::vector<int> batches{64, 512};
    int epochs = 5, device = 0, tf32 = 0;
    std::size_t vector_floats = std::size_t(1) << 26;
    std::string data_dir = DataConfig{}.dir;
    std::vector<std::string> layers;
    BenchArgs args(argc, argv, "tether-bench-gpu",
                   "[--batches 64,512] [--epochs 5] [--data DIR] [--device N] [--tf32 0|1] "
                   "[--layers \"conv 32 3x3 pad 1;relu;maxpool 2;dense 10\"] [--vector-floats 67108864 (0: none)]");
    while (args.next()) {
        if (args.is("--batches")) {
            batches.clear();
            for (long long b : args.integers(1, 1 << 20)) batches.push_back(int(b));
        } else if (args.is("--epochs")) epochs = int(args.integer(1, 1 << 20));
        else if (args.is("--data")) data_dir = args.text();
        else if (args.is("--device")) device = int(args.integer(0, 1023));
        else if (args.is("--tf32")) tf32 = int(args.integer(0, 1));
        else if (args.is("--layers")) layers = args.parts(';');
        else if (args.is("--vector-floats")) vector_floats = std::size_t(args.integer(0, 1ll << 34));
        else args.unknown();
    }
    if (cuda_device_count() == 0) {
        std::fprintf(stderr, "tether-bench-gpu: no usable GPU (%s)\n",
                     cuda_built() ? "the CUDA backend loaded but counts no device" : "the CUDA backend is not built or not found");
        return 77;
    }
    auto backend = make_backend({"cuda", 1, device, false});
    // The MLP's parameter count (784-256-128-10): the vector a strategy exchanges every window.
    const std::size_t mlp_floats = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
    json result = {{"device", backend->description()}};
    if (vector_floats > 0) {  // --vector-floats 0: training alone
        result["vector_kernels_large"] = {{"floats", vector_floats}, {"ops", vector_kernels(*backend, vector_floats)}};
        result["vector_kernels_mlp"] = {{"floats", mlp_floats}, {"ops", vector_kernels(*backend, mlp_floats)}};
        result["exchange_transfers"] = exchange_transfers(*backend, mlp_floats);
    }
    json training = json::array();
    for (int batch : batches) {
        training.push_back(train(data_dir, layers, device, batch, epochs, tf32 != 0));
        std::fprintf(stderr, "batch %d: %.0f samples/s, test accuracy %.4f\n", batch,
                     training.back()["samples_per_second"].get<double>(), training.back()["test_accuracy"].get<double>());
    }
    result["training"] = training;
    std::printf("%s\n", result.dump().c_str());
    return 0;
}
