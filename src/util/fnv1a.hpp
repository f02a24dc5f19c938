// FNV-1a, 64 bits: a fast hash that is the same on every host and build, for fingerprints
// (cluster/agreed_settings.hpp) and file identities (data/load.hpp); not for security.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tether {

inline std::uint64_t fnv1a(const char* bytes, std::size_t size, std::uint64_t hash = 1469598103934665603ull) {
    for (std::size_t i = 0; i < size; ++i) {
        hash ^= std::uint8_t(bytes[i]);
        hash *= 1099511628211ull;
    }
    return hash;
}

}  // namespace tether
