// Host-side loops for center rules (x~ lives in host memory on the center). They run once per
// exchange over the whole vector, on the center's only thread, so they are written to
// vectorize: no early exits, and reductions kept in independent lanes (a single running double
// sum is a serial chain the compiler may not reorder).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tether::host {

// Sum of squares of x, in 16 float lanes per block of 4096 elements, the blocks summed in double.
inline double sum_of_squares(const float* x, std::size_t n) {
    constexpr std::size_t kLanes = 16, kBlock = 4096;
    double total = 0;
    for (std::size_t start = 0; start < n; start += kBlock) {
        const std::size_t end = start + kBlock < n ? start + kBlock : n;
        float lanes[kLanes] = {};
        std::size_t i = start;
        for (; i + kLanes <= end; i += kLanes)
            for (std::size_t l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * x[i + l];
        for (; i < end; ++i) lanes[0] += x[i] * x[i];
        for (float lane : lanes) total += lane;
    }
    return total;
}

inline double norm(const float* x, std::size_t n) { return std::sqrt(sum_of_squares(x, n)); }

// False when any element is NaN or +-Inf (all exponent bits set), tested on the bits so the
// loop is one OR-reduction the compiler vectorizes.
inline bool all_finite(const float* x, std::size_t n) {
    constexpr std::uint32_t kExponent = 0x7f800000u;
    std::uint32_t any_special = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, x + i, sizeof bits);
        any_special |= (bits & kExponent) == kExponent;
    }
    return any_special == 0;
}

}  // namespace tether::host
