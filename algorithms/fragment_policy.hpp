// Streaming DiLoCo's worker half (Douillard et al., "Streaming DiLoCo with overlapping
// communication: Towards a Distributed Free Lunch", 2025): x in F fragments, fragment f (server
// f's range) exchanged after the local steps t with (t - floor(f H / F)) mod H = 0. The offsets
// floor(f H / F) are distinct for F <= H, so at most one fragment is due after any step, and
// two due fragments are at least floor(H / F) steps apart: the most a reply may take to land.
#pragma once

#include <tether/exchange_policy.hpp>

#include <stdexcept>
#include <string>

namespace tether {

class FragmentPolicy final : public ExchangePolicy {
public:
    FragmentPolicy(int window, std::size_t fragments, Landing landing)
        : window_(std::size_t(window)), fragments_(fragments), landing_(landing) {}

    std::size_t offset(std::size_t f) const { return f * window_ / fragments_; }
    std::optional<std::size_t> due(std::size_t step) override {
        const std::size_t phase = step % window_;
        const std::size_t f = (phase * fragments_ + window_ - 1) / window_;  // the least f with offset(f) >= phase
        if (f < fragments_ && offset(f) == phase) return f;
        return std::nullopt;
    }
    std::size_t fragments() const override { return fragments_; }
    Landing landing() const override { return landing_; }
    int window() const override { return int(window_); }
    // Each fragment needs a step of its own in the window.
    void set_window(int steps) override {
        if (steps < int(fragments_))
            throw std::invalid_argument("FragmentPolicy::set_window: " + std::to_string(steps) + " steps for " +
                                        std::to_string(fragments_) + " fragments; at least one step each");
        window_ = std::size_t(steps);
    }

private:
    std::size_t window_, fragments_;
    Landing landing_;
};

}  // namespace tether
