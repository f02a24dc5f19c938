#pragma once

#include "config/config.hpp"
#include "data/dataset.hpp"

namespace tether {

// The train and test sets a config names: IDX files under data.dir, or a synthetic problem.
TrainTestSplit load_data(const DataConfig& config, std::uint64_t seed);

}  // namespace tether
