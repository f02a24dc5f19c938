// What the tether command's runs tell their run directory (record/run_recorder.hpp), from the
// config: the settings it records, and the set the curve is measured on.
#pragma once

#include <memory>
#include <string>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "record/run_recorder.hpp"

namespace tether {

// The samples the curve is measured on: "validation" (the split) or "test" (no split).
struct CurveSet {
    std::string name;
    std::shared_ptr<const Dataset> data;
    std::size_t limit = 0;  // eval.test_samples applies to the test set only
};
CurveSet curve_set(const RunConfig& config, const TrainTestSplit& data);

// The config as the run directory records it (config.json is config.resolved).
RecordSettings record_settings(const RunConfig& config);
// The same, with what the data tell: the curve set's chance accuracy.
RecordSettings record_settings(const RunConfig& config, const TrainTestSplit& data);

}  // namespace tether
