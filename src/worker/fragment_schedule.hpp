// Streaming DiLoCo's schedule (ExchangeSchedule in <tether/strategy.hpp>): with H local steps a
// window and F fragments, fragment f goes out after the local step t when
// (t - floor(f H / F)) mod H = 0. The offsets floor(f H / F) are distinct for F <= H, so at most
// one fragment is due after any step, and two due fragments are at least floor(H / F) steps apart.
#pragma once

#include <cstddef>
#include <optional>

namespace tether {

class FragmentSchedule {
public:
    FragmentSchedule(std::size_t window, std::size_t fragments) : window_(window), fragments_(fragments) {}

    std::size_t offset(std::size_t f) const { return f * window_ / fragments_; }
    // The fragment due after local step t >= 1, if any.
    std::optional<std::size_t> due(std::size_t t) const {
        const std::size_t phase = t % window_;
        const std::size_t f = (phase * fragments_ + window_ - 1) / window_;  // the least f with offset(f) >= phase
        if (f < fragments_ && offset(f) == phase) return f;
        return std::nullopt;
    }

private:
    std::size_t window_, fragments_;
};

}  // namespace tether
