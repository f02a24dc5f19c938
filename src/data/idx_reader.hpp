// IDX files (the MNIST / Fashion-MNIST format): a big-endian header of magic (0x0000 08 nn,
// unsigned bytes, nn dimensions), the dimension sizes, then the raw bytes. Gzip or raw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tether {

struct IdxArray {
    std::vector<std::uint32_t> dimensions;
    std::vector<std::uint8_t> values;
};

// Throws std::runtime_error naming `path` and what is wrong: missing or unreadable file, bad
// magic, unsupported element type, wrong number of dimensions, truncated data, trailing bytes.
IdxArray read_idx(const std::string& path, std::size_t expected_dimensions);

}  // namespace tether
