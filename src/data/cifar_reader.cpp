#include "data/cifar_reader.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

#include "util/huge_pages.hpp"

namespace tether {
namespace {

constexpr int kSide = 32, kChannels = 3;
constexpr std::size_t kPixels = std::size_t(kSide) * kSide * kChannels;

std::vector<unsigned char> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error(path + ": cannot open; data.dir must hold the CIFAR binary version "
                                 "(https://www.cs.toronto.edu/~kriz/cifar.html, see docs/models.md)");
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::shared_ptr<Dataset> read_cifar(const std::vector<std::string>& paths, CifarVariant variant) {
    const std::size_t label_bytes = variant == CifarVariant::cifar10 ? 1 : 2;
    const int classes = variant == CifarVariant::cifar10 ? 10 : 100;
    const std::size_t record = label_bytes + kPixels;
    auto data = std::make_shared<Dataset>();
    data->features = kPixels;
    data->classes = classes;
    data->channels = kChannels;
    data->height = data->width = kSide;
    // Room for every file's records at once, asked in 2 MB pages before the first is filled:
    // growing file by file would copy the images read so far at each file.
    std::size_t expected = 0;
    for (const auto& path : paths) {
        std::error_code error;  // a missing or unreadable file is reported by read_file below
        const auto bytes = std::filesystem::file_size(path, error);
        if (!error) expected += std::size_t(bytes) / record;
    }
    reserve_in_huge_pages(data->images, expected * kPixels);
    data->labels.reserve(expected);
    for (const auto& path : paths) {
        const std::vector<unsigned char> bytes = read_file(path);
        if (bytes.empty() || bytes.size() % record != 0)
            throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                                     std::to_string(record) + "-byte " +
                                     (variant == CifarVariant::cifar10 ? "CIFAR-10" : "CIFAR-100") +
                                     " records (truncated, or the other CIFAR variant: check data.source)");
        const std::size_t count = bytes.size() / record;
        const std::size_t first = data->labels.size();
        data->labels.resize(first + count);
        data->images.resize((first + count) * kPixels);
        for (std::size_t r = 0; r < count; ++r) {
            const unsigned char* rec = bytes.data() + r * record;
            const int label = rec[label_bytes - 1];  // CIFAR-100: the fine label follows the coarse one
            if (label >= classes)
                throw std::runtime_error(path + ": record " + std::to_string(r) + " has label " + std::to_string(label) +
                                         "; labels must be 0-" + std::to_string(classes - 1) +
                                         " (is this a CIFAR-" + (classes == 10 ? "100" : "10") + " file? check data.source)");
            data->labels[first + r] = label;
            // The file stores the red plane, then green, then blue; rows of the data set are HWC.
            const unsigned char* planes = rec + label_bytes;
            float* out = data->images.data() + (first + r) * kPixels;
            for (std::size_t p = 0; p < std::size_t(kSide) * kSide; ++p)
                for (int c = 0; c < kChannels; ++c) out[p * kChannels + c] = planes[c * kSide * kSide + p] * (1.f / 255.f);
        }
    }
    return data;
}

void normalize_channels(Dataset& train, Dataset& test) {
    const int channels = train.channels;
    const std::size_t n_channels = std::size_t(channels);
    std::vector<double> sum(n_channels), squares(n_channels);
    for (std::size_t i = 0; i < train.images.size(); ++i) {
        sum[i % channels] += train.images[i];
        squares[i % channels] += double(train.images[i]) * train.images[i];
    }
    const double count = double(train.images.size() / std::size_t(channels));
    std::vector<float> mean(n_channels), inverse_std(n_channels);
    for (int c = 0; c < channels; ++c) {
        mean[c] = float(sum[c] / count);
        const double variance = squares[c] / count - double(mean[c]) * mean[c];
        inverse_std[c] = variance > 1e-12 ? float(1.0 / std::sqrt(variance)) : 1.f;
    }
    for (Dataset* d : {&train, &test})
        for (std::size_t i = 0; i < d->images.size(); ++i)
            d->images[i] = (d->images[i] - mean[i % channels]) * inverse_std[i % channels];
}

TrainTestSplit load_cifar(const std::string& dir, CifarVariant variant) {
    namespace fs = std::filesystem;
    std::vector<std::string> train_files;
    std::string test_file;
    if (variant == CifarVariant::cifar10) {
        for (int i = 1; i <= 5; ++i) {
            const fs::path p = fs::path(dir) / ("data_batch_" + std::to_string(i) + ".bin");
            if (fs::exists(p)) train_files.push_back(p.string());
        }
        if (train_files.empty())
            throw std::runtime_error(dir + ": no data_batch_1.bin ... data_batch_5.bin; data.dir must hold the CIFAR-10 "
                                     "binary version (https://www.cs.toronto.edu/~kriz/cifar.html, see docs/models.md)");
        test_file = (fs::path(dir) / "test_batch.bin").string();
    } else {
        train_files.push_back((fs::path(dir) / "train.bin").string());
        test_file = (fs::path(dir) / "test.bin").string();
    }
    auto train = read_cifar(train_files, variant);
    auto test = read_cifar({test_file}, variant);
    normalize_channels(*train, *test);
    return TrainTestSplit{train, test, nullptr};
}

}  // namespace tether
