#include "train/batch_split.hpp"

#include <algorithm>

#include "backend/cpu_backend.hpp"
#include "backend/float_mode.hpp"
#include "train/local_trainer.hpp"
#include "util/errors.hpp"

namespace tether {

std::string CpuThreadPlan::describe() const {
    auto plural = [](int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
    std::string text = plural(threads, "thread") + ": ";
    if (layer_blocks > 1) text += "each layer's weights in " + plural(layer_blocks, "block") + " of rows on as many threads, ";
    if (batch_slices > 1) text += "each minibatch in " + plural(batch_slices, "row slice") + " on as many threads, ";
    return text + "OpenBLAS " + plural(blas_threads, "thread") + ", " + blas_core() + " kernels";
}

CpuThreadPlan use_cpu_threads(const RunConfig& config, int threads, int workers_in_process) {
    const CpuThreadPlan plan = plan_cpu_threads(config, threads, workers_in_process);
    set_blas_threads(plan.blas_threads, config.training.flush_denormals);
    return plan;
}

CpuThreadPlan plan_cpu_threads(const RunConfig& config, int threads, int workers_in_process) {
    CpuThreadPlan plan = plan_cpu_threads(threads, int(config.training.batch_size), workers_in_process);
    const std::string& split = config.training.thread_split;
    // A worker on a GPU trains there: no CPU split to check or choose.
    const bool on_gpu = config.training.device.rfind("cuda", 0) == 0;
    if (plan.threads < 2 || split == "rows" || on_gpu) return plan;
    const auto& hidden = config.model.hidden_layers;
    const bool mlp = config.model.layers.empty() && !hidden.empty();
    const auto narrowest = mlp ? *std::min_element(hidden.begin(), hidden.end()) : 0;
    if (split == "layers" && narrowest < plan.threads)
        throw ConfigError("training.thread_split: \"layers\" splits each hidden layer of model.hidden_layers between the " +
                          std::to_string(plan.threads) + " threads of a worker, " +
                          (mlp ? "and the narrowest has " + std::to_string(narrowest) + (narrowest == 1 ? " unit" : " units")
                               : std::string("and this model has none")) +
                          "; set training.threads to at most " + std::to_string(std::max<std::int64_t>(1, narrowest)) +
                          ", or use \"rows\" (minibatch row slices) or \"auto\"");
    if (split == "auto" && narrowest < std::int64_t(kMinUnitsPerBlock) * plan.threads) return plan;
    plan.layer_blocks = plan.threads;
    plan.batch_slices = 1;
    plan.blas_threads = 1;  // each block's GEMMs on its own thread
    return plan;
}

CpuThreadPlan plan_cpu_threads(int threads, int batch_size, int workers_in_process) {
    CpuThreadPlan plan;
    plan.threads = std::max(1, threads);
    plan.batch_slices = std::clamp(batch_size / kMinRowsPerSlice, 1, plan.threads);
    // One process-wide OpenBLAS thread count: several workers or slices calling it at once
    // with more than one thread each would oversubscribe the cores.
    plan.blas_threads = plan.batch_slices > 1 || workers_in_process > 1 ? 1 : plan.threads;
    return plan;
}

struct SlicedGradient::Replica {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Model> model;
    DeviceBuffer<float> gradient;
    double loss = 0;
    float weight = 0;  // this slice's share of the batch's rows
};

SlicedGradient::SlicedGradient(const RunConfig& config, const Dataset& data, int slices, std::uint64_t noise_seed,
                               bool flush_denormals)
    : features_(data.features) {
    for (int s = 0; s < slices; ++s) {
        auto r = std::make_unique<Replica>();
        r->backend = make_cpu_backend(1, flush_denormals);
        // Each slice draws its own dropout masks, as rows of one batch would.
        r->model = make_model(config, *r->backend, data, noise_seed + std::uint64_t(s) * 0x9E3779B97F4A7C15ull);
        num_parameters_ = r->model->num_parameters();
        // Slice 0 writes into the caller's gradient buffer (compute()); the others need their own.
        if (s > 0) r->gradient = DeviceBuffer<float>(*r->backend, num_parameters_);
        replicas_.push_back(std::move(r));
    }
    team_ = std::make_unique<StepTeam>(slices, [flush_denormals] { set_flush_denormals(flush_denormals); });
}

SlicedGradient::~SlicedGradient() = default;

double SlicedGradient::compute(const float* parameters, const Batch& batch, float* gradient, const BatchFill& fill) {
    const int slices = std::min(this->slices(), std::max(1, batch.rows / kMinRowsPerSlice));
    used_slices_ = slices;
    for (auto& r : replicas_) r->weight = 0;
    // Slice s uses replica s, whichever thread claims it.
    team_->run(slices, [&](int s) {
        Replica& r = *replicas_[std::size_t(s)];
        const int first = batch.rows * s / slices, rows = batch.rows * (s + 1) / slices - first;
        if (fill) fill(std::size_t(first), std::size_t(first + rows), 0, features_, nullptr, 0, true);
        const Batch slice{batch.inputs + std::size_t(first) * features_, batch.labels + first, rows};
        r.loss = r.model->evaluate_with_gradient(parameters, slice, s == 0 ? gradient : r.gradient.data());
        r.weight = float(rows) / float(batch.rows);
    });
    double loss = 0;
    for (int s = 0; s < slices; ++s) loss += double(replicas_[std::size_t(s)]->weight) * replicas_[std::size_t(s)]->loss;
    return loss;
}

void SlicedGradient::finish(float* gradient, const RangeWork& then) {
    // Twice as many ranges as threads: a range a descheduled helper has not started is taken
    // by another member.
    const std::size_t ranges = 2 * std::size_t(team_->members());
    team_->run(int(ranges), [&](int s) {
        const std::size_t begin = num_parameters_ * std::size_t(s) / ranges,
                          end = num_parameters_ * std::size_t(s + 1) / ranges;
        const float w0 = replicas_[0]->weight;
        for (std::size_t i = begin; i < end; ++i) gradient[i] *= w0;
        for (int o = 1; o < used_slices_; ++o) {
            const float w = replicas_[std::size_t(o)]->weight;
            const float* g = replicas_[std::size_t(o)]->gradient.data();
            for (std::size_t i = begin; i < end; ++i) gradient[i] += w * g[i];
        }
        if (then) then(begin, end);
    });
}

}  // namespace tether
