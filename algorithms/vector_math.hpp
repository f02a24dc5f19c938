// Host-side loops for center rules (x~ lives in host memory on the center).
#pragma once

#include <cmath>
#include <cstddef>

namespace tether::host {

inline double norm(const float* x, std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
    return std::sqrt(s);
}

}  // namespace tether::host
