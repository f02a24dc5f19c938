// The run's data as one stream of positions, for leases (cluster.leases, center/leases.hpp):
// position q is row q mod N of pass q / N over the training set, each pass in its own order
// drawn from the seed, alike in every worker, so that a lease's positions mean the same rows
// whichever worker trains them and no row comes twice within a pass.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset.hpp"

namespace tether {

class SampleStream {
public:
    SampleStream(std::shared_ptr<const Dataset> data, std::uint64_t seed);

    std::uint64_t pass() const { return whole_.size(); }  // positions of one pass: N
    // Positions [start, start + count) as rows, in order.
    DatasetView rows(std::uint64_t start, std::uint64_t count);

private:
    const DatasetView& order(std::uint64_t pass);  // pass p's order (the last one drawn is kept)

    std::shared_ptr<const Dataset> data_;
    DatasetView whole_;
    std::uint64_t seed_;
    std::uint64_t pass_ = ~std::uint64_t(0);
    DatasetView order_;
};

}  // namespace tether
