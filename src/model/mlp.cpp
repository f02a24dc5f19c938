#include "model/mlp.hpp"

#include <cmath>
#include <random>
#include <stdexcept>

namespace tether {

Mlp::Mlp(Backend& backend, std::vector<std::size_t> sizes) : backend_(backend), sizes_(std::move(sizes)) {
    if (sizes_.size() < 2) throw std::invalid_argument("an MLP needs at least an input and an output size");
    for (std::size_t l = 0; l < layers(); ++l) {
        offsets_.push_back(num_parameters_);
        num_parameters_ += sizes_[l] * sizes_[l + 1] + sizes_[l + 1];
    }
}

std::string Mlp::description() const {
    std::string s = "mlp ";
    for (std::size_t i = 0; i < sizes_.size(); ++i) s += (i ? "-" : "") + std::to_string(sizes_[i]);
    return s;
}

void Mlp::initialize(float* p, std::uint64_t seed) const {
    std::mt19937_64 rng(seed);
    for (std::size_t l = 0; l < layers(); ++l) {
        std::normal_distribution<float> he(0.f, std::sqrt(2.f / float(sizes_[l])));
        float* w = p + offsets_[l];
        for (std::size_t i = 0; i < sizes_[l] * sizes_[l + 1]; ++i) w[i] = he(rng);
        float* b = w + sizes_[l] * sizes_[l + 1];
        for (std::size_t i = 0; i < sizes_[l + 1]; ++i) b[i] = 0.f;
    }
}

void Mlp::reserve(int rows) {
    if (rows <= capacity_rows_) return;
    activations_.clear();
    deltas_.clear();
    for (std::size_t l = 0; l < layers(); ++l) {
        activations_.emplace_back(backend_, std::size_t(rows) * sizes_[l + 1]);
        deltas_.emplace_back(backend_, std::size_t(rows) * sizes_[l + 1]);
    }
    capacity_rows_ = rows;
}

void Mlp::forward(const float* p, const float* inputs, int rows) {
    reserve(rows);
    const float* in = inputs;
    for (std::size_t l = 0; l < layers(); ++l) {
        float* out = activations_[l].data();
        backend_.gemm(false, false, rows, int(sizes_[l + 1]), int(sizes_[l]), 1.f, in, weights(p, l), 0.f, out);
        backend_.add_bias(out, bias(p, l), rows, int(sizes_[l + 1]), /*relu=*/l + 1 < layers());
        in = out;
    }
}

double Mlp::evaluate_with_gradient(const float* p, const Batch& batch, float* gradient) {
    const int rows = batch.rows;
    forward(p, batch.inputs, rows);
    const std::size_t last = layers() - 1;
    const double loss = backend_.softmax_cross_entropy(activations_[last].data(), batch.labels, rows,
                                                       int(sizes_.back()), deltas_[last].data());
    for (std::size_t l = layers(); l-- > 0;) {
        const float* input = l == 0 ? batch.inputs : activations_[l - 1].data();
        float* dw = gradient + offsets_[l];
        float* db = dw + sizes_[l] * sizes_[l + 1];
        backend_.gemm(true, false, int(sizes_[l]), int(sizes_[l + 1]), rows, 1.f, input, deltas_[l].data(), 0.f, dw);
        backend_.column_sums(db, deltas_[l].data(), rows, int(sizes_[l + 1]));
        if (l == 0) break;
        // The input layer's delta is never needed, which saves the largest GEMM of the pass.
        backend_.gemm(false, true, rows, int(sizes_[l]), int(sizes_[l + 1]), 1.f, deltas_[l].data(), weights(p, l),
                      0.f, deltas_[l - 1].data());
        backend_.relu_backward(deltas_[l - 1].data(), activations_[l - 1].data(), std::size_t(rows) * sizes_[l]);
    }
    return loss;
}

double Mlp::evaluate(const float* p, const Batch& batch, std::int32_t* classes) {
    forward(p, batch.inputs, batch.rows);
    if (classes) backend_.argmax_rows(classes, activations_.back().data(), batch.rows, int(sizes_.back()));
    return backend_.softmax_cross_entropy(activations_.back().data(), batch.labels, batch.rows, int(sizes_.back()),
                                          nullptr);
}

}  // namespace tether
