#include "data/validation_split.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace tether {

namespace {

// SplitMix64 and a plain modulo draw: unlike std::shuffle and std::uniform_int_distribution,
// the same on every standard library, so a center and its workers built with different
// toolchains still hold out the same samples.
std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace

std::shared_ptr<Dataset> carve_validation(Dataset& train, std::size_t count, std::uint64_t seed) {
    const std::size_t n = train.size();
    if (count >= n)
        throw std::invalid_argument("a validation split of " + std::to_string(count) + " samples leaves none of the " +
                                    std::to_string(n) + " training samples to train on");
    // The first `count` entries of a partial Fisher-Yates shuffle are a uniform sample.
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::uint64_t state = seed;
    for (std::size_t i = 0; i < count; ++i) std::swap(order[i], order[i + splitmix64(state) % (n - i)]);
    std::vector<bool> held_out(n, false);
    for (std::size_t i = 0; i < count; ++i) held_out[order[i]] = true;

    auto validation = std::make_shared<Dataset>();
    validation->features = train.features;
    validation->classes = train.classes;
    validation->channels = train.channels;
    validation->height = train.height;
    validation->width = train.width;
    validation->images.resize(count * train.features);
    validation->labels.resize(count);
    // One pass, in place: held-out rows are copied out, the others slide down, so the
    // training set is never copied whole (Fashion-MNIST's is 188 MB of floats).
    const std::size_t f = train.features;
    std::size_t kept = 0, taken = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (held_out[i]) {
            std::memcpy(validation->images.data() + taken * f, train.row(i), f * sizeof(float));
            validation->labels[taken++] = train.labels[i];
        } else {
            if (kept != i) std::memmove(train.images.data() + kept * f, train.row(i), f * sizeof(float));
            train.labels[kept++] = train.labels[i];
        }
    }
    train.images.resize(kept * f);  // capacity kept: shrinking would copy the whole set once more
    train.labels.resize(kept);
    return validation;
}

}  // namespace tether
