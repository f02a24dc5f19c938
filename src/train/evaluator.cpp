#include "train/evaluator.hpp"

#include <algorithm>

#include "train/local_trainer.hpp"

namespace tether {

namespace {
constexpr std::size_t kChunkRows = 1000;  // bounds the model's workspace during evaluation
}

Evaluator::Evaluator(const RunConfig& config, Backend& backend, std::shared_ptr<const Dataset> test, std::size_t limit)
    : backend_(backend),
      model_(make_model(config, backend, *test)),
      rows_(limit ? std::min(limit, test->size()) : test->size()),
      features_(test->features),
      data_(backend.host_addressable() ? test : nullptr),
      inputs_(backend, backend.host_addressable() ? 0 : rows_ * features_),
      labels_(backend, rows_),
      predictions_(backend, rows_),
      host_labels_(test->labels.begin(), test->labels.begin() + std::ptrdiff_t(rows_)),
      host_predictions_(rows_) {
    if (!data_) inputs_.upload(test->images.data(), rows_ * features_);
    labels_.upload(host_labels_.data(), rows_);
}

Evaluation Evaluator::evaluate(const float* parameters) {
    Evaluation e;
    double loss_sum = 0;
    for (std::size_t first = 0; first < rows_; first += kChunkRows) {
        const int rows = int(std::min(kChunkRows, rows_ - first));
        const float* inputs = (data_ ? data_->images.data() : inputs_.data()) + first * features_;
        const Batch batch{inputs, labels_.data() + first, rows};
        loss_sum += model_->evaluate(parameters, batch, predictions_.data() + first) * rows;
    }
    predictions_.download(host_predictions_.data(), rows_);
    std::size_t correct = 0;
    for (std::size_t i = 0; i < rows_; ++i) correct += host_predictions_[i] == host_labels_[i];
    e.accuracy = rows_ ? double(correct) / double(rows_) : 0.0;
    e.loss = rows_ ? loss_sum / double(rows_) : 0.0;
    return e;
}

Evaluation Evaluator::evaluate_host(const float* parameters) {
    if (staging_.size() != model_->num_parameters()) staging_ = DeviceBuffer<float>(backend_, model_->num_parameters());
    staging_.upload(parameters, staging_.size());
    return evaluate(staging_.data());
}

}  // namespace tether
