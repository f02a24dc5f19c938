#include "train/local_trainer.hpp"

#include <cmath>
#include <stdexcept>

#include "backend/cpu_backend.hpp"
#include "model/layer_model.hpp"
#include "model/mlp.hpp"
#include "train/batch_split.hpp"
#include "train/layer_split.hpp"
#include "util/errors.hpp"

namespace tether {

std::unique_ptr<Model> make_model(const RunConfig& config, Backend& backend, const Dataset& data,
                                  std::uint64_t noise_seed) {
    if (!config.model.layers.empty()) {
        const Shape input = data.height ? Shape{data.channels, data.height, data.width} : Shape{int(data.features), 1, 1};
        return std::make_unique<LayerModel>(backend, parse_layers(config.model.layers), input, data.classes, noise_seed);
    }
    std::vector<std::size_t> sizes{data.features};
    for (auto h : config.model.hidden_layers) sizes.push_back(std::size_t(h));
    sizes.push_back(std::size_t(data.classes));
    return std::make_unique<Mlp>(backend, sizes);
}

LocalTrainer::LocalTrainer(const RunConfig& config, Backend& backend, DatasetView shard, std::uint64_t seed)
    : backend_(backend),
      model_(make_model(config, backend, shard.data(), seed)),
      optimizer_(make_optimizer(config.training.optimizer, backend, model_->num_parameters())),
      shard_(std::move(shard)),
      seed_(seed),
      batch_size_(std::size_t(config.training.batch_size)),
      flush_denormals_(config.training.flush_denormals),
      parameters_(backend, model_->num_parameters()),
      gradient_(backend, model_->num_parameters()),
      inputs_(backend, batch_size_ * shard_.data().features),
      labels_(backend, batch_size_),
      host_inputs_(batch_size_ * shard_.data().features),
      host_labels_(batch_size_) {
    if (shard_.size() == 0) throw ConfigError("a worker's shard of the training set is empty: use fewer cluster.workers");
    // Every worker starts from the same point (the seed of the run, not of the worker), as the
    // strategies assume x_i = x~ at time 0.
    std::vector<float> initial(model_->num_parameters());
    model_->initialize(initial.data(), std::uint64_t(config.training.seed));
    parameters_.upload(initial.data(), initial.size());
    order_ = shard_.shuffled(seed_);
    if (!backend.host_addressable()) {
        // Every step's batch goes up from these: page-locked, at the DMA engine's rate, several
        // times that of pageable memory (measured: experiments/README.md).
        pinned_inputs_ = backend.pin_host(host_inputs_.data(), host_inputs_.size() * sizeof(float));
        pinned_labels_ = backend.pin_host(host_labels_.data(), host_labels_.size() * sizeof(std::int32_t));
    }
    // The plan is this worker's own: its shard's steps per epoch, for training.epochs (as
    // WorkerNode::train and the sequential run count them).
    const OptimizerConfig& optimizer = config.training.optimizer;
    schedule_.emplace(optimizer.schedule, steps_per_epoch() * std::size_t(config.training.epochs), steps_per_epoch(),
                      std::size_t(std::ceil(optimizer.warmup_epochs * double(steps_per_epoch()))));
    if (backend.kind() == DeviceKind::cpu) {
        cpu_plan_ = plan_cpu_threads(config, backend.threads(), 1);
        if (cpu_plan_.layer_blocks > 1)
            threaded_ = std::make_unique<LayerSplitMlp>(model_->layer_sizes(), cpu_plan_.layer_blocks,
                                                        config.training.flush_denormals);
        else if (cpu_plan_.batch_slices > 1)
            threaded_ = std::make_unique<SlicedGradient>(config, shard_.data(), cpu_plan_.batch_slices, seed,
                                                         config.training.flush_denormals);
    }
}

LocalTrainer::~LocalTrainer() = default;

std::string LocalTrainer::device_description() const {
    if (backend_.kind() != DeviceKind::cpu) return backend_.description();
    CpuThreadPlan plan = cpu_plan_;
    plan.blas_threads = blas_threads();  // what OpenBLAS is set to now, process-wide
    return "cpu (" + plan.describe() + (flush_denormals_ ? "; denormals flushed)" : "; denormals kept)");
}

std::size_t LocalTrainer::steps_per_epoch() const { return (shard_.size() + batch_size_ - 1) / batch_size_; }

void LocalTrainer::take(DatasetView rows) {
    order_ = std::move(rows);
    cursor_ = 0;
    leased_ = true;
}

std::size_t LocalTrainer::next_batch(std::size_t& first) {
    if (leased_ && cursor_ >= order_.size()) throw std::logic_error("LocalTrainer::step: the lease's rows are trained; take() the next");
    if (cursor_ >= order_.size()) {
        ++epoch_;
        order_ = shard_.shuffled(seed_ + 0x9E3779B97F4A7C15ull * (epoch_ + 1));
        cursor_ = 0;
    }
    const std::size_t rows = std::min(batch_size_, order_.size() - cursor_);
    first = cursor_;
    cursor_ += rows;
    return rows;
}

std::size_t LocalTrainer::skip(std::size_t samples) {
    const std::size_t before = samples_seen_;
    while (true) {
        const std::size_t left = cursor_ >= order_.size() ? shard_.size() : order_.size() - cursor_;
        if (left == 0 || samples_seen_ - before + std::min(batch_size_, left) > samples) break;
        std::size_t first = 0;
        samples_seen_ += next_batch(first);
        ++steps_taken_;
    }
    return samples_seen_ - before;
}

double LocalTrainer::step() {
    std::size_t first = 0;
    const std::size_t rows = next_batch(first);
    const Batch batch{inputs_.data(), labels_.data(), int(rows)};
    float* x = parameters_.data();
    float* g = gradient_.data();
    double loss = 0;
    if (threaded_) {  // on the CPU: the team's threads gather the batch, each the part it reads
        const std::size_t features = shard_.data().features;
        loss = threaded_->compute(x, batch, g, [&](std::size_t row_begin, std::size_t row_end, std::size_t feature_begin,
                                                   std::size_t feature_end, float* images, std::size_t stride, bool labels) {
            if (!images) images = inputs_.data() + row_begin * features + feature_begin, stride = features;
            order_.gather(first + row_begin, row_end - row_begin, feature_begin, feature_end, images, stride,
                          labels ? labels_.data() + row_begin : nullptr);
        });
    } else {
        if (backend_.host_addressable()) {
            order_.gather(first, rows, inputs_.data(), labels_.data());
        } else {
            order_.gather(first, rows, host_inputs_.data(), host_labels_.data());
            inputs_.upload(host_inputs_.data(), rows * shard_.data().features);
            labels_.upload(host_labels_.data(), rows);
        }
        loss = model_->evaluate_with_gradient(x, batch, g);
    }
    // Non-finite parameters (a diverging optimizer, or a huge update from the center) show up
    // here as a non-finite loss: stop now, by name, rather than train on garbage.
    if (!std::isfinite(loss))
        throw DivergedError("diverged at step " + std::to_string(steps_taken_ + 1) + " (loss " + std::to_string(loss) + ")");
    optimizer_->set_learning_rate_scale(float(schedule_->scale(steps_taken_)));
    if (threaded_) {
        // Each thread updates the parameters whose gradient it holds, while they are in its cache.
        optimizer_->begin_step();
        threaded_->finish(g, [&](std::size_t begin, std::size_t end) { optimizer_->update(x, g, begin, end); });
    } else {
        optimizer_->step(x, g);
    }
    samples_seen_ += rows;
    ++steps_taken_;
    return loss;
}

}  // namespace tether
