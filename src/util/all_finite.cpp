#include "util/all_finite.hpp"

#include <cstdint>
#include <cstring>

#include "util/target_clones.hpp"

namespace tether::host {

// Tested on the bits, so the loop is one OR-reduction the compiler vectorizes. Cloned per
// instruction set and picked at load time: on the build's baseline (SSE, 4 floats a step) the
// check of 235k floats took 34 us, with AVX2 17 us, about a memcpy of the same vector (16 us).
TETHER_CLONES bool all_finite(const float* x, std::size_t n) {
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
