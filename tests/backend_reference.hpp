// Plain-loop reference versions of the Backend's matrix operations, in double, and helpers to
// move vectors in and out of a backend. Shared by the CPU backend test and the CUDA test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/backend.hpp"

namespace tether::testing {

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float scale = 1.f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> gaussian(0.f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = gaussian(rng);
    return v;
}

template <typename T>
DeviceBuffer<T> to_backend(Backend& backend, const std::vector<T>& host) {
    DeviceBuffer<T> buffer(backend, host.size());
    if (!host.empty()) buffer.upload(host.data(), host.size());
    return buffer;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer<T>& buffer) {
    std::vector<T> host(buffer.size());
    if (!host.empty()) buffer.download(host.data(), host.size());
    return host;
}

// Row-major C = alpha op(A) op(B) + beta C; A is stored k x m when transposed, else m x k.
inline std::vector<float> gemm_reference(bool ta, bool tb, int m, int n, int k, float alpha,
                                         const std::vector<float>& a, const std::vector<float>& b, float beta,
                                         std::vector<float> c) {
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            double sum = 0;
            for (int p = 0; p < k; ++p) {
                const double av = ta ? a[std::size_t(p) * m + i] : a[std::size_t(i) * k + p];
                const double bv = tb ? b[std::size_t(j) * k + p] : b[std::size_t(p) * n + j];
                sum += av * bv;
            }
            float& out = c[std::size_t(i) * n + j];
            out = float(alpha * sum + double(beta) * out);
        }
    return c;
}

// Mean softmax cross-entropy and its gradient with respect to the logits.
inline double softmax_cross_entropy_reference(const std::vector<float>& logits, const std::vector<std::int32_t>& labels,
                                              int rows, int cols, std::vector<float>* dlogits) {
    double total = 0;
    if (dlogits) dlogits->assign(logits.size(), 0.f);
    for (int r = 0; r < rows; ++r) {
        const float* z = logits.data() + std::size_t(r) * cols;
        const double peak = *std::max_element(z, z + cols);
        double sum = 0;
        for (int j = 0; j < cols; ++j) sum += std::exp(z[j] - peak);
        total += std::log(sum) + peak - z[labels[std::size_t(r)]];
        if (dlogits)
            for (int j = 0; j < cols; ++j)
                (*dlogits)[std::size_t(r) * cols + j] =
                    float((std::exp(z[j] - peak) / sum - (j == labels[std::size_t(r)] ? 1.0 : 0.0)) / rows);
    }
    return total / rows;
}

// Largest |a - b| / (1 + |b|) over two vectors of the same length.
inline double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / (1.0 + std::fabs(double(b[i]))));
    return a.size() == b.size() ? worst : INFINITY;
}

}  // namespace tether::testing
