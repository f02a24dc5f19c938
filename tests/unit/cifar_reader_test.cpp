// The CIFAR binary reader on small files written here: record layout (label bytes, then the
// red, green and blue planes), the HWC order of the rows, per-channel normalisation from the
// training set, and the errors for truncated files and labels out of range.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/cifar_reader.hpp"
#include "data/load.hpp"
#include "train/local_trainer.hpp"
#include "test_support.hpp"

namespace {

using namespace tether;
using namespace tether::testing;

// A record whose pixel (p) of channel (c) is (seed + 3p + 7c) mod 256.
std::string record(const std::vector<int>& labels, int seed) {
    std::string r;
    for (int l : labels) r.push_back(char(l));
    for (int c = 0; c < 3; ++c)
        for (int p = 0; p < 1024; ++p) r.push_back(char((seed + 3 * p + 7 * c) % 256));
    return r;
}

std::string error_of(const std::vector<std::string>& paths, CifarVariant v) {
    try {
        read_cifar(paths, v);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("CIFAR-10: records in file order, labels, pixels reordered to HWC") {
    TempDir dir;
    write_text(dir.file("data_batch_1.bin"), record({3}, 0) + record({9}, 5));
    write_text(dir.file("data_batch_2.bin"), record({0}, 11));
    const auto data = read_cifar({dir.file("data_batch_1.bin"), dir.file("data_batch_2.bin")}, CifarVariant::cifar10);
    REQUIRE(data->size() == 3);
    CHECK(data->labels == std::vector<std::int32_t>{3, 9, 0});
    CHECK(data->classes == 10);
    CHECK(data->features == 3072);
    CHECK((data->channels == 3 && data->height == 32 && data->width == 32));
    // Record 1, pixel 10, channel 2 (blue): (5 + 30 + 14) / 255, stored at 10 * 3 + 2.
    CHECK(data->row(1)[10 * 3 + 2] == doctest::Approx(49.0 / 255.0));
}

TEST_CASE("CIFAR-100: the fine label (second byte) is the class") {
    TempDir dir;
    write_text(dir.file("train.bin"), record({4, 87}, 1) + record({19, 0}, 2));
    const auto data = read_cifar({dir.file("train.bin")}, CifarVariant::cifar100);
    CHECK(data->labels == std::vector<std::int32_t>{87, 0});
    CHECK(data->classes == 100);
}

TEST_CASE("CIFAR: truncated files and labels out of range are named errors") {
    TempDir dir;
    write_text(dir.file("short.bin"), record({1}, 0) + record({2}, 0).substr(0, 100));
    const std::string truncated = error_of({dir.file("short.bin")}, CifarVariant::cifar10);
    CHECK(contains(truncated, dir.file("short.bin") + ": 3173 bytes is not a whole number of 3073-byte CIFAR-10 records"));
    write_text(dir.file("label.bin"), record({1}, 0) + record({10}, 0));
    const std::string label = error_of({dir.file("label.bin")}, CifarVariant::cifar10);
    CHECK(contains(label, dir.file("label.bin") + ": record 1 has label 10; labels must be 0-9"));
    // A CIFAR-10 file read as CIFAR-100 is not a whole number of 3074-byte records.
    CHECK(contains(error_of({dir.file("label.bin")}, CifarVariant::cifar100), "3074-byte CIFAR-100 records"));
    CHECK(contains(error_of({dir.file("missing.bin")}, CifarVariant::cifar10), "missing.bin: cannot open"));
}

TEST_CASE("CIFAR through the config: per-channel normalisation from the training set") {
    TempDir dir;
    std::string batch;
    for (int i = 0; i < 20; ++i) batch += record({i % 10}, 13 * i);
    write_text(dir.file("data_batch_1.bin"), batch);
    write_text(dir.file("test_batch.bin"), record({2}, 3) + record({7}, 4));
    // No validation split here: the statistics are checked over the whole training file.
    RunConfig c = parse_config({{"data", {{"source", "cifar10"}, {"dir", dir.path().string()}, {"validation_samples", 0}}}});
    const TrainTestSplit split = load_data(c.data, 1);
    REQUIRE(split.train->size() == 20);
    RunConfig held_out = parse_config({{"data", {{"source", "cifar10"}, {"dir", dir.path().string()}, {"validation_samples", 5}}}});
    const TrainTestSplit with_validation = load_data(held_out.data, 1);
    CHECK(with_validation.train->size() == 15);
    REQUIRE(with_validation.validation);
    CHECK(with_validation.validation->size() == 5);
    CHECK(with_validation.validation->channels == 3);
    REQUIRE(split.test->size() == 2);
    for (int ch = 0; ch < 3; ++ch) {
        double sum = 0, squares = 0;
        const std::size_t n = split.train->images.size() / 3;
        for (std::size_t i = ch; i < split.train->images.size(); i += 3) {
            sum += split.train->images[i];
            squares += double(split.train->images[i]) * split.train->images[i];
        }
        CHECK(sum / n == doctest::Approx(0.0).epsilon(1e-4).scale(1.0));
        CHECK(squares / n == doctest::Approx(1.0).epsilon(1e-3));
    }
    // A layer model sees 3 x 32 x 32 images: conv 8 5x5 (no pad) -> 8x28x28, pool -> 8x14x14.
    RunConfig cnn = parse_config({{"data", {{"source", "cifar10"}, {"dir", dir.path().string()}}},
                                  {"model", {{"layers", {"conv 8 5x5", "relu", "maxpool 2", "dense 10"}}}}});
    auto backend = make_backend({"cpu", 1, 0});
    const auto model = make_model(cnn, *backend, *split.train);
    CHECK(model->num_parameters() == (5 * 5 * 3 * 8 + 8) + (8 * 14 * 14 * 10 + 10));
    CHECK(contains(model->description(), "layers 3x32x32"));
    // The default data.dir is Fashion-MNIST's: a CIFAR source must name its own.
    RunConfig no_dir = parse_config({{"data", {{"source", "cifar100"}}}});
    std::string message;
    try {
        load_data(no_dir.data, 1);
    } catch (const std::exception& e) {
        message = e.what();
    }
    CHECK(contains(message, "data.dir: set it"));
}
