// The CUDA backend against the CPU backend: each operation on the same inputs, then an MLP's loss
// and gradient and a few training steps. On a machine without a GPU, or in a build without
// CUDA, it says why and exits 77, which meson reports as SKIP rather than as a pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda_backend.hpp"
#include "backend_reference.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "layer_checks.hpp"
#include "model/layer_model.hpp"
#include "model/mlp.hpp"
#include "optim/optimizer.hpp"
#include "train/local_trainer.hpp"
#include <tether/tether.hpp>

namespace {

using namespace tether;
using namespace tether::testing;

struct Pair {
    std::unique_ptr<Backend> cpu = make_backend({"cpu", 1, 0});
    std::unique_ptr<Backend> gpu = make_backend({"cuda", 1, 0});
};

}  // namespace

TEST_CASE("the CUDA backend describes itself") {
    Pair p;
    CHECK(p.gpu->kind() == DeviceKind::cuda);
    CHECK_FALSE(p.gpu->host_addressable());
    CHECK(p.gpu->description().find("cuda:0") == 0);
}

TEST_CASE("gemm matches the CPU in all four transpose combinations") {
    Pair p;
    // A small odd shape and one large enough for cuBLAS to tile.
    for (const auto& shape : std::vector<std::vector<int>>{{5, 7, 9}, {130, 67, 257}}) {
        const int m = shape[0], n = shape[1], k = shape[2];
        for (const bool ta : {false, true})
            for (const bool tb : {false, true}) {
                CAPTURE(m);
                CAPTURE(ta);
                CAPTURE(tb);
                const auto a = random_vector(std::size_t(m) * k, 1), b = random_vector(std::size_t(k) * n, 2),
                           c = random_vector(std::size_t(m) * n, 3);
                std::vector<float> results[2];
                Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
                for (int i = 0; i < 2; ++i) {
                    auto da = to_backend(*backends[i], a), db = to_backend(*backends[i], b),
                         dc = to_backend(*backends[i], c);
                    backends[i]->gemm(ta, tb, m, n, k, 0.7f, da.data(), db.data(), 0.3f, dc.data());
                    results[i] = to_host(dc);
                }
                const auto expected = gemm_reference(ta, tb, m, n, k, 0.7f, a, b, 0.3f, c);
                CHECK(max_relative_error(results[1], expected) < 1e-4);
                CHECK(max_relative_error(results[1], results[0]) < 1e-4);
            }
    }
}

// training.tf32: cuBLAS may round the inputs to TF32 (10-bit mantissa, a relative error of at
// most 2^-11 per input), so each product a*b is off by at most about 2^-10 of |a||b|: the
// result is within 2e-3 of sum |a||b| of float32's, not within float32's rounding (1e-6 here);
// and plain float32 comes back when it is turned off.
TEST_CASE("gemm with TF32 allowed stays within TF32's precision of the CPU, and plain float32 comes back") {
    Pair p;
    const int m = 256, n = 192, k = 512;
    const auto a = random_vector(std::size_t(m) * k, 41), b = random_vector(std::size_t(k) * n, 42);
    auto product = [&](Backend& backend, const std::vector<float>& x, const std::vector<float>& y) {
        auto dx = to_backend(backend, x), dy = to_backend(backend, y);
        DeviceBuffer<float> dc(backend, std::size_t(m) * n);
        backend.gemm(false, false, m, n, k, 1.f, dx.data(), dy.data(), 0.f, dc.data());
        return to_host(dc);
    };
    std::vector<float> abs_a(a.size()), abs_b(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) abs_a[i] = std::fabs(a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) abs_b[i] = std::fabs(b[i]);
    const auto exact = product(*p.cpu, a, b), scale = product(*p.cpu, abs_a, abs_b);
    auto worst_error = [&](const std::vector<float>& c) {
        double worst = 0;
        for (std::size_t i = 0; i < c.size(); ++i) worst = std::max(worst, std::fabs(double(c[i]) - exact[i]) / scale[i]);
        return worst;
    };
    p.gpu->allow_tf32(true);
    const bool tensor_cores = p.gpu->description().find("TF32") != std::string::npos;  // compute capability 8.0+
    const double rounded = worst_error(product(*p.gpu, a, b));
    CHECK(rounded < 2e-3);
    if (tensor_cores) CHECK(rounded > 1e-5);  // the inputs were rounded: the tensor cores did run it
    p.gpu->allow_tf32(false);
    CHECK(p.gpu->description().find("TF32") == std::string::npos);
    CHECK(worst_error(product(*p.gpu, a, b)) < 1e-6);
}

TEST_CASE("add_bias and relu_backward match the CPU") {
    Pair p;
    const int rows = 37, cols = 19;
    const auto z = random_vector(std::size_t(rows) * cols, 5), bias = random_vector(std::size_t(cols), 6);
    for (const bool relu : {false, true}) {
        CAPTURE(relu);
        std::vector<float> results[2];
        Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
        for (int i = 0; i < 2; ++i) {
            auto dz = to_backend(*backends[i], z), db = to_backend(*backends[i], bias);
            backends[i]->add_bias(dz.data(), db.data(), rows, cols, relu);
            results[i] = to_host(dz);
        }
        CHECK(results[1] == results[0]);  // one add (and a max) per element: exact on both
    }
    std::vector<float> results[2];
    Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
    for (int i = 0; i < 2; ++i) {
        auto delta = to_backend(*backends[i], bias), activation = to_backend(*backends[i], random_vector(19, 8));
        backends[i]->relu_backward(delta.data(), activation.data(), 19);
        results[i] = to_host(delta);
    }
    CHECK(results[1] == results[0]);
}

TEST_CASE("softmax_cross_entropy matches the CPU") {
    Pair p;
    const int rows = 300, cols = 10;
    auto logits = random_vector(std::size_t(rows) * cols, 7, 4.f);
    logits[3] = 90.f;
    std::vector<std::int32_t> labels(rows);
    for (int r = 0; r < rows; ++r) labels[std::size_t(r)] = (r * 7) % cols;
    double losses[2];
    std::vector<float> gradients[2];
    Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
    for (int i = 0; i < 2; ++i) {
        auto dl = to_backend(*backends[i], logits);
        auto dy = to_backend(*backends[i], labels);
        DeviceBuffer<float> gradient(*backends[i], logits.size());
        losses[i] = backends[i]->softmax_cross_entropy(dl.data(), dy.data(), rows, cols, gradient.data());
        gradients[i] = to_host(gradient);
        CHECK(backends[i]->softmax_cross_entropy(dl.data(), dy.data(), rows, cols, nullptr) ==
              doctest::Approx(losses[i]).epsilon(1e-6));
    }
    CHECK(losses[1] == doctest::Approx(losses[0]).epsilon(1e-5));
    CHECK(max_relative_error(gradients[1], gradients[0]) < 1e-6);
    CHECK(losses[0] == doctest::Approx(softmax_cross_entropy_reference(logits, labels, rows, cols, nullptr)).epsilon(1e-5));
}

TEST_CASE("column_sums matches the CPU, also when its vector of ones must grow") {
    Pair p;
    for (const int rows : {4, 1000, 17}) {
        CAPTURE(rows);
        const int cols = 33;
        const auto m = random_vector(std::size_t(rows) * cols, std::uint64_t(rows));
        std::vector<float> results[2];
        Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
        for (int i = 0; i < 2; ++i) {
            auto dm = to_backend(*backends[i], m);
            DeviceBuffer<float> out(*backends[i], cols);
            backends[i]->column_sums(out.data(), dm.data(), rows, cols);
            results[i] = to_host(out);
        }
        CHECK(max_relative_error(results[1], results[0]) < 1e-4);
    }
}

TEST_CASE("optimizer steps match the CPU") {
    Pair p;
    const std::size_t n = 1001;
    const auto x0 = random_vector(n, 11), g1 = random_vector(n, 12), g2 = random_vector(n, 13);
    for (const char* name : {"sgd", "nesterov", "adam"}) {
        CAPTURE(name);
        OptimizerConfig config;
        config.name = name;
        config.learning_rate = 0.05;
        std::vector<float> results[2];
        Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
        for (int i = 0; i < 2; ++i) {
            auto x = to_backend(*backends[i], x0), a = to_backend(*backends[i], g1), b = to_backend(*backends[i], g2);
            auto optimizer = make_optimizer(config, *backends[i], n);
            optimizer->step(x.data(), a.data());
            optimizer->step(x.data(), b.data());
            results[i] = to_host(x);
        }
        CHECK(max_relative_error(results[1], results[0]) < 1e-6);
    }
    // adam_step directly, with explicit bias corrections.
    std::vector<float> results[2];
    Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
    for (int i = 0; i < 2; ++i) {
        auto x = to_backend(*backends[i], x0), g = to_backend(*backends[i], g1);
        auto m = to_backend(*backends[i], random_vector(n, 14, 0.1f));
        auto v = to_backend(*backends[i], std::vector<float>(n, 0.01f));
        backends[i]->adam_step(x.data(), m.data(), v.data(), g.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.19f, 0.002f);
        results[i] = to_host(x);
        const auto mh = to_host(m), vh = to_host(v);
        results[i].insert(results[i].end(), mh.begin(), mh.end());
        results[i].insert(results[i].end(), vh.begin(), vh.end());
    }
    CHECK(max_relative_error(results[1], results[0]) < 1e-6);
}

TEST_CASE("vector algebra and reductions match the CPU") {
    Pair p;
    const std::size_t n = 100003;
    const auto x = random_vector(n, 21), y = random_vector(n, 22);
    double squares[2];
    std::vector<float> results[2];
    Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
    for (int i = 0; i < 2; ++i) {
        Backend& b = *backends[i];
        auto dx = to_backend(b, x), dy = to_backend(b, y);
        DeviceBuffer<float> out(b, n);
        b.axpy(dy.data(), dx.data(), n, 0.5f);
        b.scale(dy.data(), n, 1.5f);
        b.difference(out.data(), dx.data(), dy.data(), n);
        squares[i] = b.sum_of_squares(out.data(), n);
        CHECK(b.all_finite(out.data(), n));
        std::vector<float> with_nan = x;
        with_nan[n / 2] = std::numeric_limits<float>::quiet_NaN();
        auto dn = to_backend(b, with_nan);
        CHECK_FALSE(b.all_finite(dn.data(), n));
        b.copy(dx.data(), out.data(), n * sizeof(float));
        b.synchronize();
        results[i] = to_host(dx);
        DeviceBuffer<std::int32_t> classes(b, 1000);
        b.argmax_rows(classes.data(), dx.data(), 1000, 100);
        const auto c = to_host(classes);
        results[i].insert(results[i].end(), c.begin(), c.end());
    }
    CHECK(squares[1] == doctest::Approx(squares[0]).epsilon(1e-6));
    CHECK(results[1] == results[0]);
}

// The GPU's sum of squares is its own kernel (16-byte loads where aligned, the blocks' sums
// added by the last block): every length and alignment, the same bits on every call, and a
// NaN or Inf anywhere, the first and last element included, seen by all_finite.
TEST_CASE("sum_of_squares and all_finite on the GPU: any length, any alignment, repeatable") {
    Pair p;
    Backend& gpu = *p.gpu;
    const std::size_t longest = 5000011;
    const auto x = random_vector(longest + 3, 23);
    auto dx = to_backend(gpu, x);
    for (const std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(4), std::size_t(5), std::size_t(1000),
                                std::size_t(100003), longest}) {
        for (const std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(3)}) {
            CAPTURE(n);
            CAPTURE(offset);
            double expected = 0;
            for (std::size_t i = 0; i < n; ++i) expected += double(x[offset + i]) * x[offset + i];
            const double first = gpu.sum_of_squares(dx.data() + offset, n);
            CHECK(first == doctest::Approx(expected).epsilon(1e-12));
            CHECK(gpu.sum_of_squares(dx.data() + offset, n) == first);  // bit for bit
            CHECK(gpu.all_finite(dx.data() + offset, n));
        }
    }
    for (const std::size_t at : {std::size_t(0), std::size_t(1), longest / 2, longest - 1}) {
        for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
            CAPTURE(at);
            std::vector<float> with_bad(x.begin(), x.begin() + longest);
            with_bad[at] = at % 2 ? -bad : bad;
            auto d = to_backend(gpu, with_bad);
            CHECK_FALSE(gpu.all_finite(d.data(), longest));
        }
    }
    // The largest finite floats square and sum to a finite double: no false alarm.
    std::vector<float> huge(1000, std::numeric_limits<float>::max());
    auto dh = to_backend(gpu, huge);
    CHECK(gpu.all_finite(dh.data(), huge.size()));
}

// A GPU worker's messages are page-locked (worker/worker_node.cpp): copies into them are
// exact, a range pinned twice is refused without breaking later copies, and releasing the
// token unpins it (the same range can be pinned again).
TEST_CASE("pin_host: copies through pinned memory, a refusal leaves no error behind, the token unpins") {
    Pair p;
    Backend& gpu = *p.gpu;
    const std::size_t n = 235146;
    const auto x = random_vector(n, 31);
    std::vector<float> host(n, -1.f);
    auto device = to_backend(gpu, x);
    {
        const std::shared_ptr<void> pin = gpu.pin_host(host.data(), n * sizeof(float));
        REQUIRE(pin != nullptr);
        gpu.copy_to_host(host.data(), device.data(), n * sizeof(float));
        CHECK(host == x);
        CHECK(gpu.pin_host(host.data(), n * sizeof(float)) == nullptr);  // already pinned: refused
        for (float& v : host) v *= 2.f;
        gpu.copy_from_host(device.data(), host.data(), n * sizeof(float));
        CHECK(to_host(device) == host);
    }
    CHECK(gpu.pin_host(host.data(), n * sizeof(float)) != nullptr);
    CHECK(gpu.pin_host(host.data(), 0) == nullptr);
    CHECK(p.cpu->pin_host(host.data(), n * sizeof(float)) == nullptr);  // the CPU has no use for it
}

TEST_CASE("an MLP's loss and gradient match the CPU") {
    Pair p;
    const std::vector<std::size_t> sizes{20, 32, 16, 5};
    const int rows = 64;
    const auto inputs = random_vector(std::size_t(rows) * sizes.front(), 31);
    std::vector<std::int32_t> labels(rows);
    for (int r = 0; r < rows; ++r) labels[std::size_t(r)] = r % 5;
    double losses[2];
    std::vector<float> gradients[2];
    std::vector<std::int32_t> classes[2];
    Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
    for (int i = 0; i < 2; ++i) {
        Mlp mlp(*backends[i], sizes);
        std::vector<float> x(mlp.num_parameters());
        mlp.initialize(x.data(), 4);
        auto dx = to_backend(*backends[i], x), din = to_backend(*backends[i], inputs);
        auto dy = to_backend(*backends[i], labels);
        DeviceBuffer<float> gradient(*backends[i], x.size());
        DeviceBuffer<std::int32_t> predicted(*backends[i], rows);
        losses[i] = mlp.evaluate_with_gradient(dx.data(), Batch{din.data(), dy.data(), rows}, gradient.data());
        gradients[i] = to_host(gradient);
        mlp.evaluate(dx.data(), Batch{din.data(), dy.data(), rows}, predicted.data());
        classes[i] = to_host(predicted);
    }
    CHECK(losses[1] == doctest::Approx(losses[0]).epsilon(1e-5));
    CHECK(max_relative_error(gradients[1], gradients[0]) < 1e-4);
    CHECK(classes[1] == classes[0]);
}

TEST_CASE("a few training steps on the GPU follow the CPU") {
    Pair p;
    RunConfig config = parse_config(nlohmann::json::parse(R"({
        "model": {"hidden_layers": [32]},
        "training": {"batch_size": 50, "optimizer": {"name": "sgd", "learning_rate": 0.1}}
    })"));
    SyntheticSpec spec;
    spec.train_samples = 200;
    spec.features = 12;
    const auto data = make_synthetic(spec);
    std::vector<float> parameters[2];
    Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
    for (int i = 0; i < 2; ++i) {
        LocalTrainer trainer(config, *backends[i], DatasetView::whole(data.train), 3);
        for (int s = 0; s < 6; ++s) trainer.step();  // crosses an epoch boundary (4 steps each)
        parameters[i].resize(trainer.num_parameters());
        trainer.backend().copy_to_host(parameters[i].data(), trainer.parameters(), trainer.num_parameters() * sizeof(float));
    }
    // Plain SGD keeps rounding differences as small as they start (Adam's normalization would
    // magnify them on parameters whose gradient is near zero).
    CHECK(max_relative_error(parameters[1], parameters[0]) < 1e-4);
}

TEST_CASE("conv, maxpool and dropout layers: gradients on the GPU match finite differences") {
    Pair p;
    const Shape in{3, 7, 6};
    auto conv = make_conv(*p.gpu, in, 4, 3, 3, 2, 1, true);
    std::vector<float> w(conv->num_parameters());
    std::mt19937_64 rng(1);
    conv->initialize(w.data(), rng);
    LayerCase c{*conv, *p.gpu, in, 2, random_vector(2 * in.size(), 2), w, {}};
    CHECK(check_layer_gradients(c) > (c.inputs.size() + w.size()) / 2);
    auto pool = make_maxpool(*p.gpu, in, 2);
    LayerCase pc{*pool, *p.gpu, in, 2, distinct_values(2 * in.size(), 0.1f, 3), {}, {}};
    CHECK(check_layer_gradients(pc, 1e-3f) == pc.inputs.size());
    auto norm = make_layer_norm(*p.gpu, in);
    std::vector<float> gamma_beta = random_vector(norm->num_parameters(), 7);
    LayerCase nc{*norm, *p.gpu, in, 2, random_vector(2 * in.size(), 8), gamma_beta, {}};
    CHECK(check_layer_gradients(nc) > (nc.inputs.size() + gamma_beta.size()) * 9 / 10);
    auto drop = make_dropout(*p.gpu, in, 0.5f);
    LayerCase dc{*drop, *p.gpu, in, 2, random_vector(2 * in.size(), 4), {}, Pass{true, 5}};
    CHECK(check_layer_gradients(dc) > dc.inputs.size() / 2);
}

TEST_CASE("a conv net's loss and gradient on the GPU match the CPU (same dropout masks)") {
    Pair p;
    const auto specs = parse_layers({"conv 8 3x3 pad 1", "relu", "maxpool 2", "conv 8 3x3 stride 2", "relu",
                                     "layernorm", "dense 16", "relu", "dropout 0.3", "dense 5"});
    const Shape in{2, 12, 12};
    const int rows = 9;
    const auto x = random_vector(rows * in.size(), 6);
    std::vector<std::int32_t> labels;
    for (int r = 0; r < rows; ++r) labels.push_back(r % 5);
    std::vector<float> losses, gradients[2];
    Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
    for (int i = 0; i < 2; ++i) {
        LayerModel model(*backends[i], specs, in, 5, 42);
        std::vector<float> w(model.num_parameters());
        model.initialize(w.data(), 7);
        auto dw = to_backend(*backends[i], w), dx = to_backend(*backends[i], x);
        auto dl = to_backend(*backends[i], labels);
        DeviceBuffer<float> g(*backends[i], w.size());
        losses.push_back(float(model.evaluate_with_gradient(dw.data(), Batch{dx.data(), dl.data(), rows}, g.data())));
        gradients[i] = to_host(g);
    }
    CHECK(losses[1] == doctest::Approx(losses[0]).epsilon(1e-4));
    CHECK(max_relative_error(gradients[1], gradients[0]) < 1e-3);
}

// The embedding API with parameters in GPU memory (Memory::cuda, as a PyTorch user's CUDA
// tensors): a worker over two device buffers trains by known steps and exchanges through each
// strategy family, blocking and overlapped; x~ and the buffers must end as with host memory.
TEST_CASE("embedding API: a worker on GPU memory ends with the same x~ as on host memory") {
    Pair p;
    const std::size_t first = 1000, second = 2357, n = first + second;
    const auto start = random_vector(n, 51), delta = random_vector(n, 52);
    for (const char* strategy : {R"({"name": "downpour", "communication_window": 2})",
                                 R"({"name": "aeasgd", "communication_window": 2})",
                                 R"({"name": "adag", "communication_window": 3})"}) {
        for (const bool overlap : {false, true}) {
            CAPTURE(strategy);
            CAPTURE(overlap);
            std::vector<float> center_x[2], trained[2];
            for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
                Backend& b = on_gpu ? *p.gpu : *p.cpu;
                tether::ServiceOptions options;
                // Replies a window late: the strategy's block with overlap_steps = its window.
                nlohmann::json block = nlohmann::json::parse(strategy);
                if (overlap) block["overlap_steps"] = block["communication_window"];
                options.strategy = block.dump();
                auto center = tether::CenterService::start(start, options);
                DeviceBuffer<float> x(b, n), step(b, n);
                step.upload(delta.data(), n);
                auto worker = center->connect_worker({{x.data(), first}, {x.data() + first, second}},
                                                     on_gpu ? tether::Memory::cuda : tether::Memory::host);
                CHECK(to_host(x) == start);  // joined: the buffers hold x~(0)
                for (int s = 0; s < 7; ++s) {
                    b.axpy(x.data(), step.data(), n, -0.01f * float(s + 1));  // "a local step"
                    b.synchronize();
                    worker->step(1);
                }
                const tether::WorkerReport report = worker->finish();
                CHECK(report.exchanges >= 3);
                center_x[on_gpu] = center->wait();
                trained[on_gpu] = to_host(x);
            }
            CHECK(max_relative_error(center_x[1], center_x[0]) < 1e-5);
            CHECK(max_relative_error(trained[1], trained[0]) < 1e-5);
            CHECK(max_relative_error(center_x[1], start) > 1e-3);  // the exchanges did move x~
        }
    }
}

int main(int argc, char** argv) {
    if (!tether::cuda_built()) {
        std::puts("SKIP: this tether was built without the CUDA backend");
        return 77;
    }
    const int devices = tether::cuda_device_count();
    if (devices == 0) {
        std::puts("SKIP: no CUDA GPU is visible on this machine (cuda_device_count() == 0)");
        return 77;
    }
    std::printf("running on %d CUDA device(s)\n", devices);
    doctest::Context context(argc, argv);
    return context.run();
}
