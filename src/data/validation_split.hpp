// The validation split: samples held out of the training set, so that every choice a run or a
// sweep makes (the accuracy curve, best accuracy, time to target, a tuned learning rate) is
// made without looking at the test set, which is evaluated once, at the end.
#pragma once

#include <cstdint>
#include <memory>

#include "data/dataset.hpp"

namespace tether {

// The split does not depend on training.seed: every run on the same training set holds out
// the same samples, so runs that differ only in their seed or strategy are compared on the
// same validation set.
constexpr std::uint64_t kValidationSplitSeed = 0x7e7e'0001;

// Moves `count` samples, drawn with `seed` (uniformly, without replacement), out of `train`
// into the returned data set. Both keep the original order of their samples, so shards and
// shuffles stay as deterministic as before. `count` must leave at least one training sample.
std::shared_ptr<Dataset> carve_validation(Dataset& train, std::size_t count, std::uint64_t seed = kValidationSplitSeed);

}  // namespace tether
