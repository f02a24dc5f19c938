// How S servers split x~ (cluster.servers): server k owns the contiguous server range
// [first, first + count), the ranges in order and their sizes differing by at most one (the
// first n mod S one element longer). Servers and workers compute it alike from n and S, both
// part of the agreed settings.
#pragma once

#include <algorithm>
#include <cstddef>

namespace tether {

struct ServerRange {
    std::size_t first = 0, count = 0;
};

inline ServerRange server_range(std::size_t n, std::size_t servers, std::size_t k) {
    const std::size_t base = n / servers, extra = n % servers;
    return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

}  // namespace tether
