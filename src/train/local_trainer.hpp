// One worker's local training: its shard, its copy of the parameters, the model and the
// local optimizer with its learning-rate schedule. step() runs one minibatch; the shard is
// reshuffled at every local epoch.
// Strategies act on parameters() between steps.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <tether/schedule.hpp>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "model/model.hpp"
#include "optim/optimizer.hpp"
#include "train/batch_split.hpp"

namespace tether {


// The model a config asks for, on `backend`, sized for `data`. `noise_seed` drives dropout
// (each worker passes its own seed, so workers draw different masks).
std::unique_ptr<Model> make_model(const RunConfig& config, Backend& backend, const Dataset& data,
                                  std::uint64_t noise_seed = 0);

class LocalTrainer {
public:
    // `shard` is this worker's part of the training set; `seed` drives its shuffling.
    // On a CPU backend with several threads, each step is shared between them as
    // plan_cpu_threads(config) says: each layer's weights in blocks (train/layer_split.hpp) or
    // each minibatch in row slices (train/batch_split.hpp); OpenBLAS must then be on one thread.
    LocalTrainer(const RunConfig& config, Backend& backend, DatasetView shard, std::uint64_t seed);
    ~LocalTrainer();

    // Runs one minibatch and returns its mean training loss.
    double step();
    // Passes over the minibatches of the first `samples` samples without training on them, as
    // step() would have taken them (order, epochs, schedule): a worker that takes over a place
    // trained that far goes on with the rest of its shard. Returns the samples passed over.
    std::size_t skip(std::size_t samples);
    // Leases (cluster.leases): the next steps train on `rows`, in order, instead of the shard;
    // once they are used up, only another take() gives step() rows again.
    void take(DatasetView rows);
    // The rows of the last take() that no step has trained yet.
    std::size_t rows_left() const { return leased_ ? order_.size() - cursor_ : 0; }
    std::size_t batch_size() const { return batch_size_; }

    Backend& backend() { return backend_; }
    // The device and how this trainer uses its threads, for the line every run prints.
    std::string device_description() const;
    Model& model() { return *model_; }
    float* parameters() { return parameters_.data(); }
    std::size_t num_parameters() const { return model_->num_parameters(); }
    // Steps that make one pass over this worker's shard.
    std::size_t steps_per_epoch() const;
    std::size_t samples_seen() const { return samples_seen_; }
    std::size_t steps_taken() const { return steps_taken_; }

private:
    // The next minibatch's rows in order_, from `first`; a new epoch's order when one ends.
    std::size_t next_batch(std::size_t& first);

    Backend& backend_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<Optimizer> optimizer_;
    std::unique_ptr<ThreadedGradient> threaded_;  // null: one pass on the backend's threads
    CpuThreadPlan cpu_plan_;                      // how threaded_ shares a step
    DatasetView shard_, order_;
    std::uint64_t seed_;
    std::size_t batch_size_;
    bool flush_denormals_;
    // training.optimizer.warmup_epochs and .schedule over this worker's planned local steps
    std::optional<LearningRateSchedule> schedule_;
    std::size_t cursor_ = 0, epoch_ = 0, samples_seen_ = 0, steps_taken_ = 0;
    bool leased_ = false;  // order_ is a lease's rows (take), not the shard's
    DeviceBuffer<float> parameters_, gradient_, inputs_;
    DeviceBuffer<std::int32_t> labels_;
    std::vector<float> host_inputs_;
    std::vector<std::int32_t> host_labels_;
    // Backend::pin_host's tokens for the two vectors above (null on the CPU); declared after
    // them, so that they are unpinned before they are freed.
    std::shared_ptr<void> pinned_inputs_, pinned_labels_;
};

}  // namespace tether
