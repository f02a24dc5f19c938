#include "center/buffer_average.hpp"

#include <algorithm>

namespace tether {

void BufferAverage::contribute(std::uint32_t id, const float* buffers) {
    std::vector<float>& mine = contributions_[id];
    mine.assign(buffers, buffers + mean_.size());
    stale_ = true;
}

const std::vector<float>& BufferAverage::mean() const {
    if (stale_) {
        // In double, in worker-id order: the same contributions give the same b~ bit for bit.
        std::vector<double> sum(mean_.size(), 0.0);
        for (const auto& [id, buffers] : contributions_)
            for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += buffers[j];
        const double n = double(contributions_.size());
        for (std::size_t j = 0; j < sum.size(); ++j) mean_[j] = float(sum[j] / n);
        stale_ = false;
    }
    return mean_;
}

void BufferAverage::restore(std::vector<float> mean) {
    contributions_.clear();
    mean_ = std::move(mean);
    stale_ = false;
}

}  // namespace tether
