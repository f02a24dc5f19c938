#pragma once

#include "config/config.hpp"
#include "data/dataset.hpp"

namespace tether {

// The train, validation and test sets a config names: IDX or CIFAR files under data.dir, or a
// synthetic problem; data.validation_samples of the training samples held out as validation
// (data/validation_split.hpp), the same ones in every process of a run.
TrainTestSplit load_data(const DataConfig& config, std::uint64_t seed);

}  // namespace tether
