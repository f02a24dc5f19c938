#pragma once

#include "config/config.hpp"
#include "data/dataset.hpp"

namespace tether {

// The train, validation and test sets a config names: IDX or CIFAR files under data.dir, or a
// synthetic problem; data.validation_samples of the training samples held out as validation
// (data/validation_split.hpp), the same ones in every process of a run.
TrainTestSplit load_data(const DataConfig& config, std::uint64_t seed);

// What the workers of a run must agree their data is (part of the agreed settings,
// cluster/agreed_settings.hpp): for IDX files their sizes and a hash of their first 64 KiB
// (reading the whole set would slow every start); for synthetic data the generator's parameters.
nlohmann::json data_identity(const DataConfig& data, std::int64_t seed);

}  // namespace tether
