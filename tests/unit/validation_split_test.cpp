// The validation split: held-out samples leave the training set (no sample in both), the same
// ones in every process and for every training.seed, and a split that leaves nothing to train
// on is a config error naming data.validation_samples.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/load.hpp"
#include "data/validation_split.hpp"
#include "test_support.hpp"
#include "util/errors.hpp"

namespace {

using nlohmann::json;
using tether::Dataset;

// n one-pixel images: image i holds the value i (a byte) and the label i mod 3, so each sample
// can be told apart after the split.
Dataset numbered(std::size_t n) {
    Dataset d;
    d.features = 1;
    d.classes = 3;
    for (std::size_t i = 0; i < n; ++i) {
        d.images.push_back(float(i));
        d.labels.push_back(std::int32_t(i % 3));
    }
    return d;
}

std::vector<int> ids(const Dataset& d) {
    std::vector<int> out;
    for (float v : d.images) out.push_back(int(v));
    return out;
}

// An IDX pair of n one-pixel images (value i, label i mod 3) under `dir`, as train and test.
void write_idx_set(const std::string& dir, std::uint32_t n) {
    auto header = [](std::uint8_t dims, std::vector<std::uint32_t> sizes) {
        std::string out{'\0', '\0', '\x08', char(dims)};
        for (std::uint32_t s : sizes)
            for (int shift = 24; shift >= 0; shift -= 8) out += char(std::uint8_t(s >> shift));
        return out;
    };
    std::string images = header(3, {n, 1, 1}), labels = header(1, {n});
    for (std::uint32_t i = 0; i < n; ++i) {
        images += char(std::uint8_t(i));
        labels += char(std::uint8_t(i % 3));
    }
    for (const char* prefix : {"/train", "/test"}) {
        tether::testing::write_text(dir + prefix + "-images", images);
        tether::testing::write_text(dir + prefix + "-labels", labels);
    }
}

tether::RunConfig idx_config(const std::string& dir, int validation_samples, int seed) {
    return tether::parse_config({{"data",
                                  {{"dir", dir},
                                   {"train_images", "train-images"},
                                   {"train_labels", "train-labels"},
                                   {"test_images", "test-images"},
                                   {"test_labels", "test-labels"},
                                   {"validation_samples", validation_samples}}},
                                 {"training", {{"seed", seed}}}});
}

}  // namespace

TEST_CASE("carving moves the held-out samples out of the training set, both keeping their order") {
    Dataset train = numbered(1000);
    const auto validation = tether::carve_validation(train, 100);
    REQUIRE(validation->size() == 100);
    REQUIRE(train.size() == 900);
    CHECK(train.images.size() == 900);
    const std::vector<int> kept = ids(train), held = ids(*validation);
    CHECK(std::is_sorted(kept.begin(), kept.end()));
    CHECK(std::is_sorted(held.begin(), held.end()));
    // Every sample is in exactly one of the two, with its own label.
    std::set<int> all(kept.begin(), kept.end());
    all.insert(held.begin(), held.end());
    CHECK(all.size() == 1000);
    for (std::size_t i = 0; i < validation->size(); ++i) CHECK(validation->labels[i] == held[i] % 3);
    for (std::size_t i = 0; i < train.size(); ++i) CHECK(train.labels[i] == kept[i] % 3);
    // Drawn from the whole set, not its head: a tenth of the samples, about a tenth of each half.
    const auto first_half = std::count_if(held.begin(), held.end(), [](int id) { return id < 500; });
    CHECK(first_half > 30);
    CHECK(first_half < 70);
    CHECK(validation->features == 1);
    CHECK(validation->classes == 3);
}

TEST_CASE("the split is the same every time for a seed, and another seed holds out other samples") {
    Dataset a = numbered(500), b = numbered(500), c = numbered(500);
    const auto va = tether::carve_validation(a, 50), vb = tether::carve_validation(b, 50);
    const auto vc = tether::carve_validation(c, 50, tether::kValidationSplitSeed + 1);
    CHECK(ids(*va) == ids(*vb));
    CHECK(ids(a) == ids(b));
    CHECK(ids(*va) != ids(*vc));
    Dataset small = numbered(5);
    CHECK_THROWS_WITH(tether::carve_validation(small, 5), doctest::Contains("leaves none of the 5 training samples"));
}

TEST_CASE("load_data holds out data.validation_samples of an IDX training set, whatever training.seed") {
    tether::testing::TempDir dir;
    write_idx_set(dir.path().string(), 40);
    const tether::TrainTestSplit one = tether::load_data(idx_config(dir.path().string(), 10, 1).data, 1);
    const tether::TrainTestSplit two = tether::load_data(idx_config(dir.path().string(), 10, 2).data, 2);
    REQUIRE(one.validation);
    CHECK(one.train->size() == 30);
    CHECK(one.validation->size() == 10);
    CHECK(one.test->size() == 40);  // the test set is untouched
    CHECK(one.validation->images == two.validation->images);
    CHECK(one.train->images == two.train->images);
    for (float v : one.validation->images)
        CHECK(std::find(one.train->images.begin(), one.train->images.end(), v) == one.train->images.end());

    const tether::TrainTestSplit none = tether::load_data(idx_config(dir.path().string(), 0, 1).data, 1);
    CHECK_FALSE(none.validation);
    CHECK(none.train->size() == 40);

    CHECK_THROWS_WITH_AS(tether::load_data(idx_config(dir.path().string(), 40, 1).data, 1),
                         doctest::Contains("data.validation_samples: 40 would leave none of the 40 training samples"),
                         tether::ConfigError);
}

TEST_CASE("synthetic data draws its validation samples in addition to data.train_samples") {
    const tether::RunConfig config = tether::parse_config(
        {{"data", {{"source", "synthetic"}, {"train_samples", 300}, {"test_samples", 50}, {"validation_samples", 120}}}});
    const tether::TrainTestSplit split = tether::load_data(config.data, 3);
    CHECK(split.train->size() == 300);
    REQUIRE(split.validation);
    CHECK(split.validation->size() == 120);
    CHECK(split.test->size() == 50);
    CHECK(tether::parse_config(json::object()).data.validation_samples == 5000);
}
