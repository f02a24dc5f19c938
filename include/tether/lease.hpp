// A block of the run's data a worker trains next (cluster.leases): positions [start, start +
// count) of one stream over the training set, in which position q is sample q mod N of pass
// q / N, in an order every worker draws alike from the run's seed. The center hands them out;
// count 0: no work is left.
#pragma once

#include <cstdint>

namespace tether {

struct Lease {
    std::uint64_t start = 0, count = 0;
};

}  // namespace tether
