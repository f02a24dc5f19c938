// In-memory labelled data sets: images as rows of floats in [0, 1], labels as int32 class
// ids. A DatasetView is an ordered subset (a worker's shard, a shuffled epoch) that never
// copies the pixels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tether {

struct Dataset {
    std::size_t features = 0;
    int classes = 0;
    // Each row is an image of height x width pixels with `channels` values per pixel, stored
    // pixel by pixel (HWC); 0 x 0 for flat data (synthetic), which a model sees as features x 1 x 1.
    int channels = 1, height = 0, width = 0;
    std::vector<float> images;          // size() * features, row-major
    std::vector<std::int32_t> labels;

    std::size_t size() const { return labels.size(); }
    const float* row(std::size_t i) const { return images.data() + i * features; }
};

class DatasetView {
public:
    DatasetView() = default;
    DatasetView(std::shared_ptr<const Dataset> data, std::vector<std::uint32_t> indices);
    static DatasetView whole(std::shared_ptr<const Dataset> data);

    std::size_t size() const { return indices_.size(); }
    const Dataset& data() const { return *data_; }
    std::uint32_t index(std::size_t i) const { return indices_[i]; }

    // Worker i's contiguous 1/n of this view (sizes differ by at most one).
    DatasetView shard(std::size_t i, std::size_t n) const;
    // A copy of this view in an order drawn from `seed` (same seed, same order).
    DatasetView shuffled(std::uint64_t seed) const;

    // Copies rows [first, first + count) of the view into contiguous host buffers.
    void gather(std::size_t first, std::size_t count, float* images, std::int32_t* labels) const;
    // The same rows, only features [feature_begin, feature_end) of each: row r's at
    // images + r * stride, and the labels when `labels` is not null. So several threads can
    // each gather their part of one minibatch, into one buffer or each into its own.
    void gather(std::size_t first, std::size_t count, std::size_t feature_begin, std::size_t feature_end, float* images,
                std::size_t stride, std::int32_t* labels) const;

private:
    std::shared_ptr<const Dataset> data_;
    std::vector<std::uint32_t> indices_;
};

struct TrainTestSplit {
    std::shared_ptr<const Dataset> train;       // what the workers train on
    std::shared_ptr<const Dataset> test;
    std::shared_ptr<const Dataset> validation;  // held out of the training set; null when none is
};

// Reads an IDX image file and its label file (gzip or raw), checks that they agree, and scales
// pixels to [0, 1]. `classes` is 1 + the largest label seen.
std::shared_ptr<Dataset> load_idx_pair(const std::string& images_path, const std::string& labels_path);

// A seeded, linearly separable problem: `classes` Gaussian blobs in `features` dimensions.
struct SyntheticSpec {
    std::size_t train_samples = 2000;
    std::size_t test_samples = 500;
    std::size_t features = 16;
    int classes = 4;
    float noise = 0.5f;
    std::uint64_t seed = 7;
};
TrainTestSplit make_synthetic(const SyntheticSpec& spec);

}  // namespace tether
