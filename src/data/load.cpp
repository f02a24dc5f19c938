#include "data/load.hpp"

#include "data/cifar_reader.hpp"
#include "util/errors.hpp"

#include <filesystem>
#include <stdexcept>

namespace tether {

static std::string resolve(const DataConfig& c, const std::string& file) {
    const std::filesystem::path p(file);
    return p.is_absolute() ? file : (std::filesystem::path(c.dir) / p).string();
}

TrainTestSplit load_data(const DataConfig& c, std::uint64_t seed) {
    if (c.source == "synthetic") {
        SyntheticSpec spec;
        spec.train_samples = std::size_t(c.train_samples);
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

}  // namespace tether
