// The finiteness check of every exchanged vector, on the worker before it sends and on the
// center before a rule sees it. It runs over the whole vector once per exchange, so it is
// written to vectorize: no early exit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tether::host {

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
