// Accuracy and loss of a parameter vector on a data set (validation, test, or a slice of the
// training set). Has its own model instance, so evaluating never disturbs a trainer's
// workspace. A GPU backend holds the samples in its memory, uploaded once; a backend that reads
// host memory (the CPU) reads them where the data set holds them: a copy would cost each run
// 50 MB of fresh memory for Fashion-MNIST's evaluators, and page faults are slow on a virtual
// machine.
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "model/model.hpp"

namespace tether {

struct Evaluation {
    double accuracy = 0;
    double loss = 0;
};

class Evaluator {
public:
    // Uses the first `limit` samples of `test` (0 = all).
    Evaluator(const RunConfig& config, Backend& backend, std::shared_ptr<const Dataset> test, std::size_t limit);

    // `parameters` lives in this evaluator's backend memory.
    Evaluation evaluate(const float* parameters);
    // `parameters` lives in host memory (e.g. the center's x~).
    Evaluation evaluate_host(const float* parameters);

    std::size_t size() const { return rows_; }

private:
    Backend& backend_;
    std::unique_ptr<Model> model_;
    std::size_t rows_, features_;
    std::shared_ptr<const Dataset> data_;  // the data set whose rows are read in place; null on a GPU
    DeviceBuffer<float> inputs_, staging_;  // inputs_: the samples, uploaded, where data_ is null
    DeviceBuffer<std::int32_t> labels_, predictions_;
    std::vector<std::int32_t> host_labels_, host_predictions_;
};

}  // namespace tether
