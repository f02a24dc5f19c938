// Checks of one layer (model/layers.hpp) on any backend, shared by the CPU unit test and the
// CUDA test: the analytic backward pass against central finite differences of the layer's own
// forward pass, with the scalar loss L = sum(out * weights) for fixed random weights.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend_reference.hpp"
#include "model/layers.hpp"

namespace tether::testing {

struct LayerCase {
    Layer& layer;
    Backend& backend;
    Shape in;
    int rows;
    std::vector<float> inputs;      // rows x in.size()
    std::vector<float> parameters;  // layer.num_parameters()
    Pass pass;
};

class LayerProbe {
public:
    explicit LayerProbe(LayerCase& c)
        : c_(c), outputs_(c.rows * c.layer.output_shape().size()),
          weights_(random_vector(outputs_, 99)), in_(to_backend(c.backend, c.inputs)),
          p_(to_backend(c.backend, c.parameters.empty() ? std::vector<float>{0.f} : c.parameters)),
          out_(c.backend, outputs_) {
        c.layer.reserve(c.rows);
    }
    // L at the given inputs and parameters; `pattern` gets the sign of every output (a
    // difference whose pattern changes straddles a ReLU kink and is not checked).
    double loss(const std::vector<float>& x, const std::vector<float>& p, std::vector<bool>* pattern = nullptr) {
        in_.upload(x.data(), x.size());
        if (!p.empty()) p_.upload(p.data(), p.size());
        c_.layer.forward(p_.data(), in_.data(), out_.data(), c_.rows, c_.pass);
        const auto out = to_host(out_);
        double total = 0;
        if (pattern) pattern->clear();
        for (std::size_t i = 0; i < outputs_; ++i) {
            total += double(out[i]) * weights_[i];
            if (pattern) pattern->push_back(out[i] > 0.f);
        }
        return total;
    }
    // Analytic d(L)/d(inputs) and d(L)/d(parameters).
    void gradients(std::vector<float>& dx, std::vector<float>& dp) {
        loss(c_.inputs, c_.parameters);
        auto dout = to_backend(c_.backend, weights_);
        DeviceBuffer<float> din(c_.backend, c_.inputs.size());
        DeviceBuffer<float> g(c_.backend, std::max<std::size_t>(1, c_.parameters.size()));
        c_.layer.backward(p_.data(), in_.data(), out_.data(), dout.data(), din.data(), g.data(), c_.rows);
        dx = to_host(din);
        dp = to_host(g);
        dp.resize(c_.parameters.size());
    }

private:
    LayerCase& c_;
    std::size_t outputs_;
    std::vector<float> weights_;
    DeviceBuffer<float> in_, p_, out_;
};

// Checks every input and parameter derivative; returns how many were checked.
inline std::size_t check_layer_gradients(LayerCase& c, float h = 1e-2f) {
    LayerProbe probe(c);
    std::vector<float> dx, dp;
    probe.gradients(dx, dp);
    std::size_t checked = 0;
    auto check_all = [&](std::vector<float>& values, const std::vector<float>& analytic, const char* what) {
        std::vector<bool> base, plus, minus;
        probe.loss(c.inputs, c.parameters, &base);
        for (std::size_t i = 0; i < values.size(); ++i) {
            const float keep = values[i];
            values[i] = keep + h;
            const double f_plus = probe.loss(c.inputs, c.parameters, &plus);
            values[i] = keep - h;
            const double f_minus = probe.loss(c.inputs, c.parameters, &minus);
            values[i] = keep;
            if (plus != base || minus != base) continue;
            const double numeric = (f_plus - f_minus) / (2.0 * h);
            CAPTURE(what);
            CAPTURE(i);
            CHECK(std::fabs(numeric - analytic[i]) <= 1e-2 * std::max(1.0, std::fabs(numeric)));
            ++checked;
        }
    };
    check_all(c.inputs, dx, "input");
    check_all(c.parameters, dp, "parameter");
    return checked;
}

// Inputs with every value distinct and at least `spacing` apart (shuffled), so that a max
// pooling window never has a near-tie and a ReLU input is never within spacing/2 of zero.
inline std::vector<float> distinct_values(std::size_t n, float spacing, std::uint64_t seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = spacing * (float(i) - float(n) / 2.f + 0.5f);
    std::mt19937_64 rng(seed);
    std::shuffle(v.begin(), v.end(), rng);
    return v;
}

}  // namespace tether::testing
