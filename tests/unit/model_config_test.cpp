// model.layers and the device keys in the config: parsing and errors, the fingerprint that
// refuses a worker with another model, training a layer model through the LocalTrainer, and
// the choice of GPU per worker.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "backend/device_choice.hpp"
#include "config/config.hpp"
#include "config_support.hpp"
#include "data/dataset.hpp"
#include "run/model_identity.hpp"
#include "test_support.hpp"
#include "train/evaluator.hpp"
#include "train/local_trainer.hpp"

using namespace tether;
using namespace tether::testing;
using nlohmann::json;

TEST_CASE("model.layers: parsed, syntax errors name the layer, and it excludes hidden_layers") {
    const RunConfig c = parse_config({{"model", {{"layers", {"conv 8 3x3 pad 1", "relu", "maxpool 2", "dense 10"}}}}});
    CHECK(c.model.layers.size() == 4);
    CHECK(c.resolved["model"]["layers"][0] == "conv 8 3x3 pad 1");
    CHECK(parse_config(json::object()).model.layers.empty());  // the MLP stays the default
    CHECK(contains(parse_error({{"model", {{"layers", {"dense 10", "pool 2"}}}}}),
                   "model.layers[1] \"pool 2\": unknown layer \"pool\""));
    CHECK(contains(parse_error({{"model", {{"layers", {"dense 10", 3}}}}}), "model.layers: expected a list of layers"));
    CHECK(contains(parse_error({{"model", {{"layers", {"dense 10"}}, {"hidden_layers", {64}}}}}),
                   "either hidden_layers (an MLP) or layers"));
}

TEST_CASE("training.device and training.eval_device accept auto, cpu, cuda and cuda:N") {
    const RunConfig c = parse_config({{"training", {{"device", "cuda:3"}, {"eval_device", "cuda"}}}});
    CHECK(c.training.device == "cuda:3");
    CHECK(c.training.eval_device == "cuda");
    CHECK(parse_config(json::object()).training.eval_device == "cpu");
    for (const char* bad : {"cuda:", "cuda:x", "gpu:0", "cuda0"}) {
        CAPTURE(bad);
        CHECK(contains(parse_error({{"training", {{"device", bad}}}}), "training.device: expected one of auto | cpu | cuda | cuda:N"));
    }
    CHECK(contains(parse_error({{"training", {{"eval_device", "tpu"}}}}), "training.eval_device"));
}

TEST_CASE("one GPU per worker: slot mod visible GPUs, unless the device string pins one") {
    CHECK(choose_backend("cuda", 1, 5, 4).cuda_device == 1);
    CHECK(choose_backend("auto", 1, 2, 4).cuda_device == 2);
    CHECK(choose_backend("auto", 1, 7, 1).cuda_device == 0);
    const BackendOptions pinned = choose_backend("cuda:2", 3, 5, 4);
    CHECK(pinned.device == "cuda");
    CHECK(pinned.cuda_device == 2);
    CHECK(pinned.threads == 3);
    CHECK(choose_backend("cpu", 2, 5, 4).device == "cpu");
    CHECK(choose_backend("auto", 2, 5, 0).device == "auto");  // no GPU: make_backend picks the CPU
    CHECK_THROWS_AS(choose_backend("cuda:4", 1, 0, 4), ConfigError);
}

TEST_CASE("the fingerprint covers the layer list") {
    SyntheticSpec spec;
    spec.features = 12;
    const auto data = make_synthetic(spec);
    auto fingerprint_of = [&](json layers) {
        return model_identity(parse_config({{"model", {{"layers", layers}}}}), *data.train).fingerprint();
    };
    const auto base = fingerprint_of({"dense 8", "relu", "dense 4"});
    CHECK(base == fingerprint_of({"dense 8", "relu", "dense 4"}));
    CHECK(base != fingerprint_of({"dense 8", "dense 4"}));            // same parameters, no ReLU
    CHECK(base != fingerprint_of({"dense 8", "relu", "dropout 0.5", "dense 4"}));
    CHECK(base != model_identity(parse_config({{"model", {{"hidden_layers", {8}}}}}), *data.train).fingerprint());
}

TEST_CASE("a layer model with dropout trains through the LocalTrainer") {
    SyntheticSpec spec;
    spec.features = 16;
    spec.train_samples = 1200;
    spec.noise = 1.5f;
    const auto data = make_synthetic(spec);
    const RunConfig config = parse_config({{"model", {{"layers", {"dense 32", "relu", "dropout 0.2", "dense 4"}}}},
                                           {"training", {{"batch_size", 32}, {"device", "cpu"}}}});
    auto backend = make_backend({"cpu", 1, 0});
    LocalTrainer trainer(config, *backend, DatasetView::whole(data.train), 3);
    Evaluator evaluator(config, *backend, data.test, 0);
    const double before = evaluator.evaluate(trainer.parameters()).accuracy;
    for (std::size_t s = 0; s < 3 * trainer.steps_per_epoch(); ++s) trainer.step();
    const double after = evaluator.evaluate(trainer.parameters()).accuracy;
    CHECK(after > 0.9);
    CHECK(after > before + 0.2);
}

TEST_CASE("every configs/cnn-*.json loads and builds its network for 1x28x28 images") {
    const char* source = std::getenv("TETHER_SOURCE_DIR");
    REQUIRE_MESSAGE(source != nullptr, "set TETHER_SOURCE_DIR to the repository root (meson test does)");
    int configs = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::string(source) + "/configs")) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("cnn-", 0) != 0) continue;
        CAPTURE(name);
        const RunConfig c = load_config(entry.path().string(), {});
        CHECK(!c.model.layers.empty());
        auto backend = make_backend({"cpu", 1, 0});
        Dataset images;
        images.features = 784;
        images.classes = 10;
        images.height = images.width = 28;
        CHECK(make_model(c, *backend, images)->num_parameters() == 421642);
        ++configs;
    }
    CHECK(configs >= 10);  // sequential and one per distributed strategy
}
