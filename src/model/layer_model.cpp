#include "model/layer_model.hpp"

#include <algorithm>

#include "util/errors.hpp"

namespace tether {
namespace {

// Evaluation and prediction run in chunks of at most this many rows, which bounds the im2col
// workspace (a conv layer's columns are rows x positions x patch floats).
constexpr int kChunkRows = 256;

std::uint64_t splitmix(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// FNV-1a: stable across builds and machines, unlike std::hash.
std::size_t text_hash(const std::string& text) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
    return std::size_t(h);
}

bool flat(Shape s) { return s.height == 1 && s.width == 1; }

// Conv and pooling windows must fit the (padded) image they slide over.
void check_window(const LayerSpec& spec, Shape in, std::size_t index) {
    const std::string from = index == 0 ? "the data" : "layer " + std::to_string(index - 1);
    if (flat(in))
        throw ConfigError(spec.where + ": needs an image, but receives a flat vector of " + std::to_string(in.size()) +
                          " values from " + from + " (synthetic data and dense outputs are flat; IDX images are 1x28x28, CIFAR 3x32x32)");
    if (in.height + 2 * spec.pad < spec.kernel_h || in.width + 2 * spec.pad < spec.kernel_w)
        throw ConfigError(spec.where + ": a " + std::to_string(spec.kernel_h) + "x" + std::to_string(spec.kernel_w) +
                          " window does not fit the " + in.text() + " (channels x height x width) input from " + from +
                          (spec.pad ? " padded by " + std::to_string(spec.pad) : std::string()) +
                          "; use a smaller kernel, more padding, or fewer pooling layers before it");
}

}  // namespace

LayerModel::LayerModel(Backend& backend, const std::vector<LayerSpec>& specs, Shape input, int classes,
                       std::uint64_t noise_seed)
    : backend_(backend), input_(input), classes_(classes), noise_seed_(noise_seed) {
    if (specs.empty()) throw ConfigError("model.layers: empty; give at least \"dense <classes>\"");
    Shape shape = input;
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const LayerSpec& spec = specs[i];
        // A ReLU right after a dense or conv layer is fused into its bias pass.
        const bool fuse_relu = i + 1 < specs.size() && specs[i + 1].kind == LayerSpec::Kind::relu &&
                               (spec.kind == LayerSpec::Kind::dense || spec.kind == LayerSpec::Kind::conv);
        std::unique_ptr<Layer> layer;
        switch (spec.kind) {
            case LayerSpec::Kind::dense: layer = make_dense(backend, shape, spec.outputs, fuse_relu); break;
            case LayerSpec::Kind::conv:
                check_window(spec, shape, i);
                layer = make_conv(backend, shape, spec.outputs, spec.kernel_h, spec.kernel_w, spec.stride, spec.pad, fuse_relu);
                break;
            case LayerSpec::Kind::maxpool:
                check_window(spec, shape, i);
                layer = make_maxpool(backend, shape, spec.kernel_h);
                break;
            case LayerSpec::Kind::relu: layer = make_relu(backend, shape); break;
            case LayerSpec::Kind::dropout: layer = make_dropout(backend, shape, spec.rate); break;
            case LayerSpec::Kind::layernorm: layer = make_layer_norm(backend, shape); break;
        }
        shape = layer->output_shape();
        texts_.push_back(fuse_relu ? spec.text + " + relu" : spec.text);
        offsets_.push_back(num_parameters_);
        num_parameters_ += layer->num_parameters();
        layers_.push_back(std::move(layer));
        if (fuse_relu) ++i;
    }
    const LayerSpec& last = specs.back();
    if (last.kind != LayerSpec::Kind::dense || last.outputs != classes)
        throw ConfigError(last.where + ": the last layer must be \"dense " + std::to_string(classes) +
                          "\" (one output per class of the data set; the softmax head reads it)");
}

std::string LayerModel::description() const {
    std::string s = "layers " + input_.text();
    for (const auto& t : texts_) s += " | " + t;
    return s;
}

std::vector<std::size_t> LayerModel::layer_sizes() const {
    std::vector<std::size_t> sizes{input_.size()};
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        sizes.push_back(text_hash(texts_[l]));
        sizes.push_back(layers_[l]->output_shape().size());
    }
    return sizes;
}

void LayerModel::initialize(float* host, std::uint64_t seed) const {
    std::mt19937_64 rng(seed);
    for (std::size_t l = 0; l < layers_.size(); ++l) layers_[l]->initialize(host + offsets_[l], rng);
}

void LayerModel::reserve(int rows) {
    if (rows <= capacity_rows_) return;
    activations_.clear();
    gradients_.clear();
    for (auto& layer : layers_) {
        layer->reserve(rows);
        const std::size_t n = std::size_t(rows) * layer->output_shape().size();
        activations_.emplace_back(backend_, n);
        gradients_.emplace_back(backend_, n);
    }
    capacity_rows_ = rows;
}

void LayerModel::forward(const float* p, const float* inputs, int rows, const Pass& pass) {
    reserve(rows);
    const float* in = inputs;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
        Pass layer_pass = pass;
        layer_pass.seed = splitmix(pass.seed ^ (l + 1));
        layers_[l]->forward(p + offsets_[l], in, activations_[l].data(), rows, layer_pass);
        in = activations_[l].data();
    }
}

double LayerModel::evaluate_with_gradient(const float* p, const Batch& batch, float* gradient) {
    const int rows = batch.rows;
    forward(p, batch.inputs, rows, Pass{true, splitmix(noise_seed_ + splitmix(draws_++))});
    const double loss =
        backend_.softmax_cross_entropy(activations_.back().data(), batch.labels, rows, classes_, gradients_.back().data());
    for (std::size_t l = layers_.size(); l-- > 0;) {
        const float* in = l == 0 ? batch.inputs : activations_[l - 1].data();
        // The input's gradient is never needed, which saves the first layer's largest GEMM.
        float* din = l == 0 ? nullptr : gradients_[l - 1].data();
        layers_[l]->backward(p + offsets_[l], in, activations_[l].data(), gradients_[l].data(), din,
                             gradient + offsets_[l], rows);
    }
    return loss;
}

double LayerModel::evaluate(const float* p, const Batch& batch, std::int32_t* classes) {
    double total = 0;
    for (int first = 0; first < batch.rows; first += kChunkRows) {
        const int rows = std::min(kChunkRows, batch.rows - first);
        forward(p, batch.inputs + std::size_t(first) * input_.size(), rows, Pass{});
        if (classes) backend_.argmax_rows(classes + first, activations_.back().data(), rows, classes_);
        total += rows * backend_.softmax_cross_entropy(activations_.back().data(), batch.labels + first, rows, classes_,
                                                       nullptr);
    }
    return batch.rows ? total / batch.rows : 0.0;
}

}  // namespace tether
