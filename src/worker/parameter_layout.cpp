#include "worker/parameter_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "util/errors.hpp"

namespace tether {

namespace {

// Two overlapping buffers would be exchanged twice and written twice. `message(a, b)` says
// that segments a < b overlap.
template <typename Message>
void check_overlaps(const std::vector<ParameterSegment>& segments, Message message) {
    std::vector<std::size_t> order(segments.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto start = [&](std::size_t i) { return reinterpret_cast<std::uintptr_t>(segments[i].data); };
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return start(a) < start(b); });
    for (std::size_t k = 1; k < order.size(); ++k) {
        const std::size_t a = order[k - 1], b = order[k];
        if (segments[a].count && segments[b].count && start(a) + segments[a].count * sizeof(float) > start(b))
            throw ConfigError(message(std::min(a, b), std::max(a, b)));
    }
}

}  // namespace

std::size_t check_parameter_segments(const std::vector<ParameterSegment>& segments) {
    if (segments.empty()) throw ConfigError("parameter buffers: none given; pass at least one (pointer, count)");
    std::size_t total = 0;
    for (std::size_t i = 0; i < segments.size(); ++i) {
        if (!segments[i].data && segments[i].count > 0)
            throw ConfigError("parameter buffer " + std::to_string(i) + ": a null pointer with " +
                              std::to_string(segments[i].count) + " elements");
        total += segments[i].count;
    }
    if (total == 0) throw ConfigError("parameter buffers: " + std::to_string(segments.size()) + " buffers of 0 elements");
    check_overlaps(segments, [](std::size_t a, std::size_t b) {
        return "parameter buffers " + std::to_string(a) + " and " + std::to_string(b) +
               " overlap in memory; give each parameter tensor once";
    });
    return total;
}

std::size_t check_buffer_segments(const std::vector<ParameterSegment>& parameters,
                                  const std::vector<ParameterSegment>& buffers) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
        if (!buffers[i].data && buffers[i].count > 0)
            throw ConfigError("model buffer " + std::to_string(i) + ": a null pointer with " +
                              std::to_string(buffers[i].count) + " elements");
        total += buffers[i].count;
    }
    std::vector<ParameterSegment> all = parameters;
    all.insert(all.end(), buffers.begin(), buffers.end());
    const auto name = [&](std::size_t i) {
        return i < parameters.size() ? "parameter buffer " + std::to_string(i)
                                     : "model buffer " + std::to_string(i - parameters.size());
    };
    check_overlaps(all, [&](std::size_t a, std::size_t b) {
        return name(a) + " and " + name(b) +
               " overlap in memory; a model buffer is averaged, not trained: it may be neither a parameter nor another buffer";
    });
    return total;
}

ParameterLayout::ParameterLayout(VectorOps& ops, std::vector<ParameterSegment> segments, bool staged)
    : ops_(ops), segments_(std::move(segments)), size_(check_parameter_segments(segments_)) {
    if (staged || segments_.size() > 1) staging_ = DeviceBuffer<float>(ops, size_);
}

template <typename Fn>
void ParameterLayout::for_range(std::size_t first, std::size_t count, Fn fn) {
    const std::size_t end = first + count;
    std::size_t offset = 0;
    for (const auto& s : segments_) {
        const std::size_t lo = std::max(first, offset), hi = std::min(end, offset + s.count);
        if (lo < hi) fn(s.data + (lo - offset), staging_.data() + lo, hi - lo);
        offset += s.count;
    }
}

void ParameterLayout::gather(std::size_t first, std::size_t count) {
    for_range(first, count, [&](float* b, float* x, std::size_t n) { ops_.copy(x, b, n * sizeof(float)); });
}

void ParameterLayout::scatter(std::size_t first, std::size_t count) {
    for_range(first, count, [&](float* b, float* x, std::size_t n) { ops_.copy(b, x, n * sizeof(float)); });
}

void ParameterLayout::subtract_x(std::size_t first, std::size_t count) {
    for_range(first, count, [&](float* b, float* x, std::size_t n) { ops_.difference(b, b, x, n); });
}

void ParameterLayout::add_x(std::size_t first, std::size_t count) {
    for_range(first, count, [&](float* b, float* x, std::size_t n) { ops_.axpy(b, x, n, 1.f); });
}

void ParameterLayout::mix_x(std::size_t first, std::size_t count, float a) {
    for_range(first, count, [&](float* b, float* x, std::size_t n) {
        ops_.scale(b, n, a);
        ops_.axpy(b, x, n, 1.f - a);
    });
}

}  // namespace tether
