#include "run/run_records.hpp"

#include "record/learning_verdict.hpp"

namespace tether {

CurveSet curve_set(const RunConfig& config, const TrainTestSplit& data) {
    if (data.validation) return {"validation", data.validation, 0};
    return {"test", data.test, std::size_t(config.eval.test_samples)};
}

RecordSettings record_settings(const RunConfig& config, const TrainTestSplit& data) {
    RecordSettings s = record_settings(config);
    const CurveSet curve = curve_set(config, data);
    s.chance_accuracy = chance_accuracy(*curve.data, curve.limit);
    return s;
}

RecordSettings record_settings(const RunConfig& config) {
    RecordSettings s;
    s.name = config.name;
    s.config = config.resolved;
    s.curve_set = config.data.validation_samples > 0 ? "validation" : "test";
    s.validation_samples = config.data.validation_samples;
    s.target_accuracy = config.eval.target_accuracy;
    s.epochs = config.training.epochs;
    s.require_learning = config.eval.require_learning;
    return s;
}

}  // namespace tether
