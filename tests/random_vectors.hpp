// Seeded Gaussian vectors and their distances, for the tests of codecs and compressed exchanges.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tether::testing {

inline std::vector<float> gaussian(std::size_t n, std::uint64_t seed, float scale, float shift = 0.f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng) + shift;
    return v;
}

inline double distance(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(s);
}

inline double norm(const std::vector<float>& a) { return distance(a, std::vector<float>(a.size(), 0.f)); }

}  // namespace tether::testing
