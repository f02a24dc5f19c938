#include "train/layer_split.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "backend/cpu_backend.hpp"
#include "backend/float_mode.hpp"

namespace tether {
namespace {

// out[r][j] = bias[j] + the sum over the blocks of block[r][j], through ReLU when `relu`:
// the T partial products of one block of output columns, made whole.
void sum_blocks(float* out, const float* bias, const std::vector<const float*>& blocks, int rows, int cols, bool relu) {
    for (int r = 0; r < rows; ++r) {
        float* o = out + std::size_t(r) * cols;
        for (int j = 0; j < cols; ++j) o[j] = bias[j];
        for (const float* block : blocks) {
            const float* b = block + std::size_t(r) * cols;
            for (int j = 0; j < cols; ++j) o[j] += b[j];
        }
        if (relu)
            for (int j = 0; j < cols; ++j) o[j] = o[j] > 0.f ? o[j] : 0.f;
    }
}

}  // namespace

struct LayerSplitMlp::Part {
    std::unique_ptr<Backend> backend;  // one thread: softmax, ReLU', column sums
    // partial[l][u]: this part's share of layer l's output, in the columns of part u's block
    // (rows x width(l + 1, u)); the head's (l = layers() - 1) is one rows x classes block.
    std::vector<std::vector<DeviceBuffer<float>>> partial;
    // This part's block of the batch's features, rows x width(0, t): its own contiguous copy,
    // so that no line it reads is written by another part (the batch's rows split mid-line)
    // and its GEMMs walk rows of whole lines, as the GEMM-only bound's do.
    DeviceBuffer<float> input;
    // activation[l], l >= 1: this part's block of layer l's input, rows x width(l, t).
    std::vector<DeviceBuffer<float>> activation;
    // delta[l], l >= 1: d(loss)/d(pre-activation) of that block.
    std::vector<DeviceBuffer<float>> delta;
    DeviceBuffer<float> logits, dlogits;
    // sums[l]: the blocks this part adds up for layer l's output, one from each part (for the
    // head, every part's partial logits), made once in reserve().
    std::vector<std::vector<const float*>> sums;
    double loss = 0;
};

LayerSplitMlp::LayerSplitMlp(std::vector<std::size_t> sizes, int threads, bool flush_denormals)
    : sizes_(std::move(sizes)), threads_(threads) {
    if (sizes_.size() < 3) throw std::invalid_argument("a layer split needs an MLP with at least one hidden layer");
    if (threads_ < 2) throw std::invalid_argument("a layer split needs at least 2 threads");
    for (std::size_t l = 1; l + 1 < sizes_.size(); ++l)
        if (sizes_[l] < std::size_t(threads_))
            throw std::invalid_argument("a layer split over " + std::to_string(threads_) + " threads needs hidden layers " +
                                        "at least as wide; hidden layer " + std::to_string(l) + " has " +
                                        std::to_string(sizes_[l]) + " units");
    std::size_t total = 0;
    for (std::size_t l = 0; l < layers(); ++l) {
        offsets_.push_back(total);
        total += sizes_[l] * sizes_[l + 1] + sizes_[l + 1];
    }
    // The team first: its threads set their own mode, whatever the mode of this thread (which
    // making a flushing backend below changes, and which new threads inherit).
    team_ = std::make_unique<StepTeam>(threads_, [flush_denormals] { set_flush_denormals(flush_denormals); });
    for (int t = 0; t < threads_; ++t) {
        auto part = std::make_unique<Part>();
        part->backend = make_cpu_backend(1, flush_denormals);
        parts_.push_back(std::move(part));
    }
}

LayerSplitMlp::~LayerSplitMlp() = default;

std::size_t LayerSplitMlp::begin(std::size_t l, int t) const { return sizes_[l] * std::size_t(t) / std::size_t(threads_); }

void LayerSplitMlp::reserve(int rows) {
    if (rows <= capacity_rows_) return;
    const std::size_t n = std::size_t(rows), classes = sizes_.back();
    for (int t = 0; t < threads_; ++t) {
        Part& p = *parts_[std::size_t(t)];
        Backend& b = *p.backend;
        p.partial.clear(), p.activation.clear(), p.delta.clear();
        p.partial.resize(layers()), p.activation.resize(layers()), p.delta.resize(layers());
        for (std::size_t l = 0; l < layers(); ++l) {
            if (l + 1 < layers())
                for (int u = 0; u < threads_; ++u) p.partial[l].emplace_back(b, n * width(l + 1, u));
            else
                p.partial[l].emplace_back(b, n * classes);
            if (l >= 1) {
                p.activation[l] = DeviceBuffer<float>(b, n * width(l, t));
                p.delta[l] = DeviceBuffer<float>(b, n * width(l, t));
            }
        }
        p.input = DeviceBuffer<float>(b, n * width(0, t));
        p.logits = DeviceBuffer<float>(b, n * classes);
        p.dlogits = DeviceBuffer<float>(b, n * classes);
    }
    for (int t = 0; t < threads_; ++t) {
        Part& p = *parts_[std::size_t(t)];
        p.sums.assign(layers(), {});
        for (std::size_t l = 0; l < layers(); ++l)
            for (const auto& other : parts_)
                p.sums[l].push_back(other->partial[l][l + 1 < layers() ? std::size_t(t) : 0].data());
    }
    capacity_rows_ = rows;
}

void LayerSplitMlp::input_layer(int t) {
    Part& p = *parts_[std::size_t(t)];
    const int rows = batch_.rows;
    const std::size_t r0 = begin(0, t), next = sizes_[1];
    // Its own block of features of every row: the only part of the inputs this part reads.
    // The labels (part 0's) are read after the syncs of the forward pass.
    const std::size_t w = width(0, t);
    if (fill_) {
        (*fill_)(0, std::size_t(rows), r0, r0 + w, p.input.data(), w, t == 0);
    } else {  // the batch is in its buffer already
        for (int r = 0; r < rows; ++r)
            std::copy_n(batch_.inputs + std::size_t(r) * sizes_[0] + r0, w, p.input.data() + std::size_t(r) * w);
    }
    for (int u = 0; u < threads_; ++u)
        cpu_gemm(false, false, rows, int(width(1, u)), int(w), p.input.data(), int(w),
                 parameters_ + weights(0) + r0 * next + begin(1, u), int(next), 0.f, p.partial[0][std::size_t(u)].data(),
                 int(width(1, u)));
}

void LayerSplitMlp::hidden_layer(int t, std::size_t l) {
    Part& p = *parts_[std::size_t(t)];
    const int rows = batch_.rows, w = int(width(l, t));
    const std::size_t c0 = begin(l, t), next = sizes_[l + 1];
    sum_blocks(p.activation[l].data(), parameters_ + bias(l - 1) + c0, p.sums[l - 1], rows, w, /*relu=*/true);
    const float* own_rows = parameters_ + weights(l) + c0 * next;
    if (l + 1 == layers()) {  // the head: partial logits, all classes
        cpu_gemm(false, false, rows, int(next), w, p.activation[l].data(), w, own_rows, int(next), 0.f,
                 p.partial[l][0].data(), int(next));
        return;
    }
    for (int u = 0; u < threads_; ++u)
        cpu_gemm(false, false, rows, int(width(l + 1, u)), w, p.activation[l].data(), w, own_rows + begin(l + 1, u),
                 int(next), 0.f, p.partial[l][std::size_t(u)].data(), int(width(l + 1, u)));
}

void LayerSplitMlp::head(int t) {
    Part& p = *parts_[std::size_t(t)];
    const std::size_t l = layers() - 1, classes = sizes_.back(), c0 = begin(l, t);
    const int rows = batch_.rows, w = int(width(l, t)), k = int(classes);
    // Every part makes the whole logits and softmax (rows x classes, a few microseconds) rather
    // than wait for one part to share them.
    sum_blocks(p.logits.data(), parameters_ + bias(l), p.sums[l], rows, k, /*relu=*/false);
    p.loss = p.backend->softmax_cross_entropy(p.logits.data(), batch_.labels, rows, k, p.dlogits.data());
    const float* own_rows = parameters_ + weights(l) + c0 * classes;
    cpu_gemm(true, false, w, k, rows, p.activation[l].data(), w, p.dlogits.data(), k, 0.f,
             gradient_ + weights(l) + c0 * classes, k);
    if (t == 0) p.backend->column_sums(gradient_ + bias(l), p.dlogits.data(), rows, k);
    cpu_gemm(false, true, rows, w, k, p.dlogits.data(), k, own_rows, k, 0.f, p.delta[l].data(), w);
    p.backend->relu_backward(p.delta[l].data(), p.activation[l].data(), std::size_t(rows) * std::size_t(w));
    p.backend->column_sums(gradient_ + bias(l - 1) + c0, p.delta[l].data(), rows, w);
}

void LayerSplitMlp::backward_layer(int t, std::size_t l) {
    Part& p = *parts_[std::size_t(t)];
    const int rows = batch_.rows, k = int(width(l, t));
    const std::size_t r0 = begin(l, t), next = sizes_[l + 1];
    const float* input = l == 0 ? p.input.data() : p.activation[l].data();
    for (int u = 0; u < threads_; ++u) {
        const float* delta = parts_[std::size_t(u)]->delta[l + 1].data();
        const int n = int(width(l + 1, u));
        const std::size_t block = r0 * next + begin(l + 1, u);
        cpu_gemm(true, false, k, n, rows, input, k, delta, n, 0.f, gradient_ + weights(l) + block, int(next));
        // The input layer's delta is never needed, which saves the largest GEMM of the pass.
        if (l > 0)
            cpu_gemm(false, true, rows, k, n, delta, n, parameters_ + weights(l) + block, int(next), u == 0 ? 0.f : 1.f,
                     p.delta[l].data(), k);
    }
    if (l == 0) return;
    p.backend->relu_backward(p.delta[l].data(), p.activation[l].data(), std::size_t(rows) * std::size_t(k));
    p.backend->column_sums(gradient_ + bias(l - 1) + r0, p.delta[l].data(), rows, k);
}

double LayerSplitMlp::compute(const float* parameters, const Batch& batch, float* gradient, const BatchFill& fill) {
    reserve(batch.rows);
    parameters_ = parameters, batch_ = batch, gradient_ = gradient, fill_ = fill ? &fill : nullptr;
    team_->run(threads_, [&](int t) { input_layer(t); });
    for (std::size_t l = 1; l < layers(); ++l) team_->run(threads_, [&](int t) { hidden_layer(t, l); });
    team_->run(threads_, [&](int t) { head(t); });
    // Down to layer 1: the input layer's weight gradient is left to finish(), which updates
    // each block of it right after computing it, while it is in cache, in the same team run.
    for (std::size_t l = layers() - 1; l-- > 1;) team_->run(threads_, [&](int t) { backward_layer(t, l); });
    fill_ = nullptr;
    return parts_[0]->loss;
}

void LayerSplitMlp::finish(float* gradient, const RangeWork& then) {
    gradient_ = gradient;  // compute()'s, by the contract of ThreadedGradient
    // Each part completes the input layer's gradient, then updates the rows it computed the
    // gradient of (the input layer's first: the freshest in its cache) and its block of biases.
    team_->run(threads_, [&](int t) {
        backward_layer(t, 0);
        if (!then) return;
        for (std::size_t l = 0; l < layers(); ++l) {
            const std::size_t row = sizes_[l + 1];
            if (width(l, t) > 0) then(weights(l) + begin(l, t) * row, weights(l) + begin(l, t + 1) * row);
            if (l >= 1 && width(l, t) > 0) then(bias(l - 1) + begin(l, t), bias(l - 1) + begin(l, t + 1));
        }
        if (t == 0) then(bias(layers() - 1), bias(layers() - 1) + sizes_.back());
    });
}

}  // namespace tether
