// The finiteness check of every exchanged vector, on the worker before it sends and on the
// center before a rule sees it. It runs over the whole vector once per exchange, on the path
// every exchange waits for, so it is written to vectorize (no early exit) and compiled for the
// widest vectors of the machine it runs on (all_finite.cpp).
#pragma once

#include <cstddef>

namespace tether::host {

// False when any element is NaN or +-Inf (all exponent bits set).
bool all_finite(const float* x, std::size_t n);

}  // namespace tether::host
