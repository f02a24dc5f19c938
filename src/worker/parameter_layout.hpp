// A worker's parameters as the training loop holds them (one buffer, or several: a model's
// tensors) and the one flat vector x the strategy's rule sees.
//
// With one buffer and blocking exchanges, x is that buffer: no copy at all. Otherwise x is a
// staging buffer of the sum of the sizes, in the worker's memory, and an exchange gathers the
// buffers into it (one device copy per buffer) before the rule makes its payload and scatters
// x back after the rule applied the reply: two copies of the model per exchange, once every
// communication window, against the window's forward and backward passes, and one extra copy
// of the model in memory. A rule keeps its own state (x_pull, ...) sized to x either way.
#pragma once

#include <cstddef>
#include <vector>

#include <tether/vector_ops.hpp>

namespace tether {

struct ParameterSegment {
    float* data = nullptr;
    std::size_t count = 0;
};

// Throws ConfigError naming the buffer for a null pointer with elements, no elements at all,
// or two buffers that overlap in memory. Returns the total element count.
std::size_t check_parameter_segments(const std::vector<ParameterSegment>& segments);
// The model buffers the center averages (none is fine): a null pointer with elements, or a
// buffer that overlaps another or a parameter buffer, is a ConfigError naming both. Returns
// their total element count.
std::size_t check_buffer_segments(const std::vector<ParameterSegment>& parameters,
                                  const std::vector<ParameterSegment>& buffers);

class ParameterLayout {
public:
    // Checks the segments (above). `staged`: x is a buffer of its own even for one segment
    // (overlapped exchanges keep there the snapshot they sent).
    ParameterLayout(VectorOps& ops, std::vector<ParameterSegment> segments, bool staged);

    std::size_t size() const { return size_; }
    float* x() { return staged() ? staging_.data() : segments_.front().data; }
    bool staged() const { return staging_.size() > 0; }

    void gather() { gather(0, size_); }    // x <- the buffers, each into its slice
    void scatter() { scatter(0, size_); }  // the buffers <- their slices of x
    // The buffers <- buffers - x, then (after the rule moved x) buffers <- buffers + x: what
    // the training loop did since x was gathered survives the rule's change to x.
    void subtract_x() { subtract_x(0, size_); }
    void add_x() { add_x(0, size_); }
    // The same over elements [first, first + count) of x alone (a streaming DiLoCo fragment).
    void gather(std::size_t first, std::size_t count);
    void scatter(std::size_t first, std::size_t count);
    void subtract_x(std::size_t first, std::size_t count);
    void add_x(std::size_t first, std::size_t count);
    // The buffers <- a buffers + (1 - a) x over that range (streaming DiLoCo's mixing).
    void mix_x(std::size_t first, std::size_t count, float a);

private:
    // fn(buffer, its x, elements) for each piece of [first, first + count) in one segment.
    template <typename Fn>
    void for_range(std::size_t first, std::size_t count, Fn fn);

    VectorOps& ops_;
    std::vector<ParameterSegment> segments_;
    std::size_t size_ = 0;
    DeviceBuffer<float> staging_;
};

}  // namespace tether
