#include "data/load.hpp"

#include "data/cifar_reader.hpp"
#include "data/validation_split.hpp"
#include "util/errors.hpp"
#include "util/fnv1a.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace tether {

static std::string resolve(const DataConfig& c, const std::string& file) {
    const std::filesystem::path p(file);
    return p.is_absolute() ? file : (std::filesystem::path(c.dir) / p).string();
}

static TrainTestSplit load_train_and_test(const DataConfig& c, std::uint64_t seed) {
    if (c.source == "synthetic") {
        SyntheticSpec spec;
        // data.train_samples counts what the workers train on: the validation samples are
        // drawn from the same blobs in addition, then held out like any other split.
        spec.train_samples = std::size_t(c.train_samples + c.validation_samples);
        spec.test_samples = std::size_t(c.test_samples);
        spec.features = std::size_t(c.features);
        spec.classes = int(c.classes);
        spec.noise = float(c.noise);
        spec.seed = seed;
        return make_synthetic(spec);
    }
    if (c.source == "cifar10" || c.source == "cifar100") {
        if (c.dir == DataConfig{}.dir)
            throw ConfigError("data.dir: set it to the directory of the CIFAR binary files (data.source is \"" + c.source +
                              "\"; the default data.dir is Fashion-MNIST's)");
        return load_cifar(c.dir, c.source == "cifar10" ? CifarVariant::cifar10 : CifarVariant::cifar100);
    }
    const std::string train_images = resolve(c, c.train_images);
    if (!std::filesystem::exists(train_images) && c.dir == DataConfig{}.dir)
        throw std::runtime_error(train_images + ": not found; install Debian's dataset-fashion-mnist "
                                 "(scripts/install-deps.sh does) or point data.dir at an IDX data set");
    TrainTestSplit split;
    split.train = load_idx_pair(train_images, resolve(c, c.train_labels));
    split.test = load_idx_pair(resolve(c, c.test_images), resolve(c, c.test_labels));
    if (split.train->features != split.test->features)
        throw std::runtime_error("data: training images have " + std::to_string(split.train->features) +
                                 " pixels but test images have " + std::to_string(split.test->features));
    // Both sets must agree on the number of classes, or the model's output layer would differ.
    const int classes = std::max(split.train->classes, split.test->classes);
    std::const_pointer_cast<Dataset>(split.train)->classes = classes;
    std::const_pointer_cast<Dataset>(split.test)->classes = classes;
    return split;
}

TrainTestSplit load_data(const DataConfig& c, std::uint64_t seed) {
    TrainTestSplit split = load_train_and_test(c, seed);
    if (c.validation_samples == 0) return split;
    const std::size_t available = split.train->size();
    if (std::size_t(c.validation_samples) >= available)
        throw ConfigError("data.validation_samples: " + std::to_string(c.validation_samples) + " would leave none of the " +
                          std::to_string(available) + " training samples to train on; hold out fewer (" +
                          std::to_string(available / 10) + " is a tenth), or 0 to evaluate on the test set as training goes");
    // The sets were just built for this call: nobody else holds them yet.
    split.validation = carve_validation(*std::const_pointer_cast<Dataset>(split.train), std::size_t(c.validation_samples));
    return split;
}

static nlohmann::json file_identity(const DataConfig& data, const std::string& file) {
    const std::string path = resolve(data, file);
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error) return {{"file", std::filesystem::path(file).filename().string()}, {"bytes", nullptr}};
    std::ifstream in(path, std::ios::binary);
    std::vector<char> head(64 * 1024);
    in.read(head.data(), std::streamsize(head.size()));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(head.data(), std::size_t(in.gcount()))));
    // The file name is left out: two hosts may name the same data differently.
    return {{"bytes", size}, {"head_hash", hex}};
}

nlohmann::json data_identity(const DataConfig& data, std::int64_t seed) {
    if (data.source == "synthetic")
        return {{"source", "synthetic"}, {"train_samples", data.train_samples}, {"test_samples", data.test_samples},
                {"features", data.features}, {"classes", data.classes}, {"noise", data.noise}, {"seed", seed},
                {"validation_samples", data.validation_samples}};
    // validation_samples decides which samples the workers' shards hold: all must agree on it.
    return {{"source", "idx"},
            {"train_images", file_identity(data, data.train_images)},
            {"train_labels", file_identity(data, data.train_labels)},
            {"validation_samples", data.validation_samples}};
}

}  // namespace tether
