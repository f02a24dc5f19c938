// An MLP step on T threads with each layer's weights split between them (tensor
// parallelism): what a CPU worker with several threads runs on an MLP whose hidden layers give
// each thread at least 32 units (training.thread_split "auto"; train/batch_split.hpp plans it).
//
// Why not row slices of the minibatch (train/batch_split.hpp): every slice reads all of the weights
// and writes a whole gradient, so each step the updated weights (940 KB for the default MLP) and
// half of every gradient cross between the cores. On a 2-core virtual machine that made the
// gradient sum and Adam slower on 2 threads than on one, and the default job ran well below what
// the same GEMMs do in row slices alone (measured: experiments/README.md). Here thread t owns block
// t of every layer's input rows: its rows of W_l, their gradient and their optimizer state never
// leave its core, and only activations cross (a few 32 KB blocks).
//
// Layer l (n_l inputs, n_{l+1} outputs) with input columns split in T blocks r_t:
//   forward:  thread t gathers its block of every input row into a buffer of its own (a row
//             of the batch split between the threads shares a cache line; faster than
//             reading the batch buffer in place) and computes its partial
//             product In[:, r_t] W_l[r_t, :], kept in blocks by the next layer's split (one
//             GEMM per block); after a sync, thread t sums the T partials of its own
//             output columns, adds the bias and applies ReLU: its block of the next input.
//             The head's partial logits are summed (and the softmax run) by every thread.
//   backward: thread t computes its own columns of each delta; after a sync, every thread
//             reads all of a layer's delta to form dW_l[r_t, :] and its block of the delta
//             below. One sync per layer each way: 2L team runs for L layers, the last of
//             them (finish()) the input layer's weight gradient and each part's update.
// The result is the whole batch's loss and gradient, up to float rounding.
//
// Why one GEMM per block of the next layer, not one per layer into full-width buffers that the
// parts read columns of (fewer, larger GEMMs, as in the GEMM-only bound): tried. The parts then
// write interleaved halves of the rows of one delta buffer, whose lines their prefetchers pull
// from each other, and read each other's partials in strides the prefetchers do not follow;
// the default job's trainer ran slower.
//
// Why equal blocks, not blocks sized to each thread's measured pace (tried: every 20 or 50
// steps, the bounds moved half way to the shares that would have equalized the parts' busy
// times): the trainer ran slightly faster, but the bounds decide the order in which the
// partial products are summed, so a run with the same seed would no longer repeat bit for
// bit. Not worth it for under 2%.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "train/step_team.hpp"
#include "train/threaded_gradient.hpp"

namespace tether {

class LayerSplitMlp final : public ThreadedGradient {
public:
    // `sizes`: the MLP's {inputs, hidden..., classes} (model/mlp.hpp, its parameter layout);
    // at least one hidden layer, each at least `threads` wide.
    LayerSplitMlp(std::vector<std::size_t> sizes, int threads, bool flush_denormals);
    ~LayerSplitMlp() override;

    int parts() const override { return threads_; }
    double compute(const float* parameters, const Batch& batch, float* gradient, const BatchFill& fill) override;
    void finish(float* gradient, const RangeWork& then) override;

private:
    struct Part;
    std::size_t layers() const { return sizes_.size() - 1; }
    // Where block t of the n_l inputs of layer l begins (t = parts(): n_l). The classes are
    // never split.
    std::size_t begin(std::size_t l, int t) const;
    std::size_t width(std::size_t l, int t) const { return begin(l, t + 1) - begin(l, t); }
    std::size_t weights(std::size_t l) const { return offsets_[l]; }
    std::size_t bias(std::size_t l) const { return offsets_[l] + sizes_[l] * sizes_[l + 1]; }
    void reserve(int rows);

    // The phases, each run by part t; compute() syncs the team between them.
    void input_layer(int t);
    void hidden_layer(int t, std::size_t l);
    void head(int t);
    void backward_layer(int t, std::size_t l);

    std::vector<std::size_t> sizes_, offsets_;
    int threads_;
    std::vector<std::unique_ptr<Part>> parts_;
    std::unique_ptr<StepTeam> team_;
    int capacity_rows_ = 0;
    // The step in progress, for the phases (finish() ends it).
    const float* parameters_ = nullptr;
    Batch batch_;
    const BatchFill* fill_ = nullptr;
    float* gradient_ = nullptr;
};

}  // namespace tether
