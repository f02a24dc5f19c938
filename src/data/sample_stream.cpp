#include "data/sample_stream.hpp"

#include <stdexcept>

namespace tether {

SampleStream::SampleStream(std::shared_ptr<const Dataset> data, std::uint64_t seed)
    : data_(data), whole_(DatasetView::whole(std::move(data))), seed_(seed) {
    if (whole_.size() == 0) throw std::invalid_argument("SampleStream: an empty training set has no positions");
}

const DatasetView& SampleStream::order(std::uint64_t pass) {
    if (pass != pass_) {
        order_ = whole_.shuffled(seed_ * 0x9E3779B97F4A7C15ull + pass + 1);
        pass_ = pass;
    }
    return order_;
}

DatasetView SampleStream::rows(std::uint64_t start, std::uint64_t count) {
    std::vector<std::uint32_t> indices;
    indices.reserve(count);
    const std::uint64_t n = pass();
    for (std::uint64_t q = start; q < start + count; ++q) indices.push_back(order(q / n).index(std::size_t(q % n)));
    return DatasetView(data_, std::move(indices));
}

}  // namespace tether
