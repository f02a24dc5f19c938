// How a CPU worker spends its threads (the plan), and one of the two ways to share a step
// between them: the minibatch in row slices. The other, the default for an MLP, splits each
// layer's weights instead (train/layer_split.hpp, which says why it is faster).
//
// The obvious split, one GEMM call spread over T OpenBLAS threads, loses on small models: the
// default MLP's GEMMs are 64 x 784 x 256 and smaller, and OpenBLAS's threads wait for each other
// with sched_yield between every call: on a 2-core virtual machine the default job ran slower with
// OpenBLAS on 2 threads than on 1 (measured: experiments/README.md). So a worker with T threads
// whose model cannot be split by layers instead splits each minibatch into T slices of rows, runs
// each slice's forward and backward pass on its own thread (its own model replica, OpenBLAS on one
// thread) and sums the slices' gradients, weighted by their rows: the same mean gradient as one
// pass over the batch, up to float rounding. The optimizer then runs once. A slice keeps at least
// kMinRowsPerSlice rows: below that a GEMM is too thin to be worth a thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "model/model.hpp"
#include "train/step_team.hpp"
#include "train/threaded_gradient.hpp"

namespace tether {

struct CpuThreadPlan {
    int threads = 1;       // this worker's share of the cores
    int layer_blocks = 1;  // blocks of each layer's weights, one thread each (layer_split.hpp)
    int batch_slices = 1;  // or: row slices of each minibatch, one thread each
    int blas_threads = 1;  // OpenBLAS's thread count (one per process)
    // "2 threads: each layer's weights in 2 blocks of rows on as many threads, OpenBLAS 1
    // thread": printed by every run.
    std::string describe() const;
};

constexpr int kMinRowsPerSlice = 16;
// training.thread_split "auto" splits an MLP's layers only when every hidden layer gives each
// thread this many units; thinner blocks make GEMMs too narrow to pay for a sync per layer.
constexpr int kMinUnitsPerBlock = 32;

// Row slices only. `workers_in_process`: workers sharing this process (and OpenBLAS's one
// thread count).
CpuThreadPlan plan_cpu_threads(int threads, int batch_size, int workers_in_process);
// The plan for `config` (training.thread_split, the model, the batch size). Throws
// ConfigError when thread_split is "layers" and the model has no layers to split that way.
CpuThreadPlan plan_cpu_threads(const RunConfig& config, int threads, int workers_in_process);
// The plan, with OpenBLAS set to it (and made to flush denormals when the config asks:
// set_blas_threads). From the thread that will train, before the trainers are made.
CpuThreadPlan use_cpu_threads(const RunConfig& config, int threads, int workers_in_process);

// The gradient of a minibatch computed as `slices` row slices on a StepTeam, one model replica
// (own backend on one thread, own activations and gradient) per slice.
class SlicedGradient final : public ThreadedGradient {
public:
    SlicedGradient(const RunConfig& config, const Dataset& data, int slices, std::uint64_t noise_seed,
                   bool flush_denormals);
    ~SlicedGradient() override;
    int slices() const { return int(replicas_.size()); }
    int parts() const override { return slices(); }

    // Runs every slice's forward and backward pass; returns the batch's mean loss. The first
    // slice's gradient goes to `gradient` (host memory), the others' to their replicas.
    double compute(const float* parameters, const Batch& batch, float* gradient, const BatchFill& fill) override;
    // Then: sums the slices' gradients, weighted by their rows, into `gradient`, each thread of
    // the team over its own range of parameters, and calls then(begin, end) on that thread
    // right after (the optimizer's update of that range, while it is still in cache).
    void finish(float* gradient, const RangeWork& then) override;

private:
    struct Replica;
    std::vector<std::unique_ptr<Replica>> replicas_;
    int used_slices_ = 0;  // by the last compute(): a short last batch may use fewer
    std::size_t num_parameters_ = 0;
    std::size_t features_ = 0;
    std::unique_ptr<StepTeam> team_;
};

}  // namespace tether
