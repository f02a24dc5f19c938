#include "data/dataset.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

#include "data/idx_reader.hpp"
#include "util/huge_pages.hpp"

namespace tether {

DatasetView::DatasetView(std::shared_ptr<const Dataset> data, std::vector<std::uint32_t> indices)
    : data_(std::move(data)), indices_(std::move(indices)) {}

DatasetView DatasetView::whole(std::shared_ptr<const Dataset> data) {
    std::vector<std::uint32_t> indices(data->size());
    std::iota(indices.begin(), indices.end(), 0u);
    return DatasetView(std::move(data), std::move(indices));
}

DatasetView DatasetView::shard(std::size_t i, std::size_t n) const {
    if (n == 0 || i >= n) throw std::invalid_argument("shard " + std::to_string(i) + " of " + std::to_string(n));
    const std::size_t begin = size() * i / n, end = size() * (i + 1) / n;
    return DatasetView(data_, std::vector<std::uint32_t>(indices_.begin() + begin, indices_.begin() + end));
}

DatasetView DatasetView::shuffled(std::uint64_t seed) const {
    std::vector<std::uint32_t> order = indices_;
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    return DatasetView(data_, std::move(order));
}

void DatasetView::gather(std::size_t first, std::size_t count, float* images, std::int32_t* labels) const {
    gather(first, count, 0, data_->features, images, data_->features, labels);
}

void DatasetView::gather(std::size_t first, std::size_t count, std::size_t feature_begin, std::size_t feature_end,
                         float* images, std::size_t stride, std::int32_t* labels) const {
    const std::size_t width = feature_end - feature_begin;
    for (std::size_t r = 0; r < count; ++r) {
        const std::uint32_t k = indices_[first + r];
        std::memcpy(images + r * stride, data_->row(k) + feature_begin, width * sizeof(float));
        if (labels) labels[r] = data_->labels[k];
    }
}

std::shared_ptr<Dataset> load_idx_pair(const std::string& images_path, const std::string& labels_path) {
    const IdxArray images = read_idx(images_path, 3);
    const IdxArray labels = read_idx(labels_path, 1);
    if (images.dimensions[0] != labels.dimensions[0])
        throw std::runtime_error(images_path + " holds " + std::to_string(images.dimensions[0]) + " images but " +
                                 labels_path + " holds " + std::to_string(labels.dimensions[0]) +
                                 " labels; they must be a matching pair");
    auto data = std::make_shared<Dataset>();
    data->features = std::size_t(images.dimensions[1]) * images.dimensions[2];
    data->height = int(images.dimensions[1]);
    data->width = int(images.dimensions[2]);
    reserve_in_huge_pages(data->images, images.values.size());
    data->images.resize(images.values.size());
    for (std::size_t i = 0; i < images.values.size(); ++i) data->images[i] = images.values[i] * (1.f / 255.f);
    data->labels.assign(labels.values.begin(), labels.values.end());
    const auto largest = std::max_element(data->labels.begin(), data->labels.end());
    data->classes = largest == data->labels.end() ? 0 : *largest + 1;
    return data;
}

TrainTestSplit make_synthetic(const SyntheticSpec& spec) {
    std::mt19937_64 rng(spec.seed);
    std::normal_distribution<float> gaussian(0.f, 1.f);
    // Class centres far apart relative to the noise keep the problem separable.
    std::vector<float> centres(std::size_t(spec.classes) * spec.features);
    for (auto& c : centres) c = 2.f * gaussian(rng);
    auto make = [&](std::size_t n) {
        auto data = std::make_shared<Dataset>();
        data->features = spec.features;
        data->classes = spec.classes;
        data->images.resize(n * spec.features);
        data->labels.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            const int label = int(i % std::size_t(spec.classes));
            data->labels[i] = label;
            for (std::size_t j = 0; j < spec.features; ++j)
                data->images[i * spec.features + j] = centres[std::size_t(label) * spec.features + j] + spec.noise * gaussian(rng);
        }
        return data;
    };
    TrainTestSplit split;
    split.train = make(spec.train_samples);
    split.test = make(spec.test_samples);
    return split;
}

}  // namespace tether
