// Element-wise kernels of the convolution, pooling and dropout layers, as Thrust functors.
// Included by thrust_ops.inl, so g++ builds them for OpenMP and nvcc for CUDA from this one
// source. Images are NHWC: the channels of one pixel are contiguous, so each functor's unit
// of work is one pixel (or one window offset) and its inner loop runs over the channels.
#pragma once

#include <cstdint>

namespace tether::ops {

// Writes the kernel row `ky` of output position (n, oy, ox) into its im2col row: kernel_w
// pixels of `channels` values, one contiguous copy when the window row lies inside the image.
TETHER_HD inline void im2col_segment(const float* images, float* columns, const WindowShape& s, std::size_t n, int oy,
                                     int ox, int ky) {
    const int c = s.channels, ow = s.out_width(), oh = s.out_height();
    float* out = columns + ((n * oh + oy) * ow + ox) * s.patch() + std::size_t(ky) * s.kernel_w * c;
    const int iy = oy * s.stride - s.pad + ky, ix0 = ox * s.stride - s.pad;
    if (iy < 0 || iy >= s.height) {
        for (int j = 0; j < s.kernel_w * c; ++j) out[j] = 0.f;
        return;
    }
    const float* in = images + ((n * s.height + iy) * s.width + ix0) * std::ptrdiff_t(c);
    if (ix0 >= 0 && ix0 + s.kernel_w <= s.width) {
        for (int j = 0; j < s.kernel_w * c; ++j) out[j] = in[j];
        return;
    }
    for (int kx = 0; kx < s.kernel_w; ++kx) {
        const bool inside = ix0 + kx >= 0 && ix0 + kx < s.width;
        for (int j = 0; j < c; ++j) out[kx * c + j] = inside ? in[kx * c + j] : 0.f;
    }
}
// One unit = one output row (n, oy): few units with long inner loops, for CPU threads.
struct Im2colRow {
    const float* images; float* columns; WindowShape s;
    TETHER_HD void operator()(std::size_t row) const {
        const std::size_t n = row / s.out_height();
        const int oy = int(row % s.out_height());
        for (int ox = 0; ox < s.out_width(); ++ox)
            for (int ky = 0; ky < s.kernel_h; ++ky) im2col_segment(images, columns, s, n, oy, ox, ky);
    }
};
// One unit = one im2col entry (position, patch index), for GPU threads: neighbouring threads
// write neighbouring entries and, within a window row, read neighbouring channels, so both
// sides coalesce. (A unit per kernel row, as before, wrote a run of kernel_w * channels floats
// per thread, the threads a whole patch apart.) The per-value units divide their index in
// `Index`, 32 bits whenever the count fits (thrust_ops.inl): a GPU divides 64-bit integers in
// software, and with 64 bits im2col and col2im took a third of the CNN's GPU time at batch 512
// (measured: experiments/README.md).
template <typename Index>
struct Im2colElement {
    const float* images; float* columns; WindowShape s;
    TETHER_HD void operator()(std::size_t index) const {
        const Index i = Index(index), patch = Index(s.patch()), p = i / patch;
        const int j = int(i - p * patch), c = s.channels, row = s.kernel_w * c;
        const int ky = j / row, kx = (j - ky * row) / c, ch = j - ky * row - kx * c;
        const Index ow = Index(s.out_width()), oh = Index(s.out_height());
        const int ox = int(p % ow), oy = int((p / ow) % oh);
        const std::size_t n = p / (ow * oh);
        const int iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
        const bool inside = iy >= 0 && iy < s.height && ix >= 0 && ix < s.width;
        columns[index] = inside ? images[((n * s.height + iy) * s.width + ix) * std::size_t(c) + ch] : 0.f;
    }
};

// One unit = one input pixel: gathers (never scatters) every column entry that read it, so
// units never write to the same place and need no atomics on the GPU.
struct Col2im {
    const float* columns; float* images; WindowShape s;
    TETHER_HD void operator()(std::size_t pixel) const {
        const int ix = int(pixel % s.width), iy = int((pixel / s.width) % s.height);
        const std::size_t n = pixel / (std::size_t(s.width) * s.height);
        const int ow = s.out_width(), oh = s.out_height(), taps = s.kernel_h * s.kernel_w;
        float* out = images + pixel * s.channels;
        for (int c = 0; c < s.channels; ++c) out[c] = 0.f;
        for (int ky = 0; ky < s.kernel_h; ++ky) {
            const int y = iy + s.pad - ky;  // = oy * stride for the output row that read (iy, ix)
            if (y < 0 || y % s.stride != 0 || y / s.stride >= oh) continue;
            for (int kx = 0; kx < s.kernel_w; ++kx) {
                const int x = ix + s.pad - kx;
                if (x < 0 || x % s.stride != 0 || x / s.stride >= ow) continue;
                const std::size_t p = (n * oh + y / s.stride) * ow + x / s.stride;
                const float* in = columns + p * (std::size_t(taps) * s.channels) + std::size_t(ky * s.kernel_w + kx) * s.channels;
                for (int c = 0; c < s.channels; ++c) out[c] += in[c];
            }
        }
    }
};

// Col2im with one unit per (pixel, channel), for GPU threads: neighbouring threads read
// neighbouring channels of the same column entries and write neighbouring values.
template <typename Index>
struct Col2imElement {
    const float* columns; float* images; WindowShape s;
    TETHER_HD void operator()(std::size_t index) const {
        const int c = s.channels;
        const Index i = Index(index), pixel = i / Index(c), width = Index(s.width), height = Index(s.height);
        const int ch = int(i - pixel * Index(c));
        const int ix = int(pixel % width), iy = int((pixel / width) % height);
        const std::size_t n = pixel / (width * height);
        const int ow = s.out_width(), oh = s.out_height(), taps = s.kernel_h * s.kernel_w;
        float total = 0.f;
        for (int ky = 0; ky < s.kernel_h; ++ky) {
            const int y = iy + s.pad - ky;
            if (y < 0 || y % s.stride != 0 || y / s.stride >= oh) continue;
            for (int kx = 0; kx < s.kernel_w; ++kx) {
                const int x = ix + s.pad - kx;
                if (x < 0 || x % s.stride != 0 || x / s.stride >= ow) continue;
                const std::size_t p = (n * oh + y / s.stride) * ow + x / s.stride;
                total += columns[p * (std::size_t(taps) * c) + std::size_t(ky * s.kernel_w + kx) * c + ch];
            }
        }
        images[index] = total;
    }
};

// One unit = one output pixel; all its channels, the window's taps in the outer loop so the
// inner loop runs over contiguous channels.
struct MaxPool {
    const float* in; float* out; std::int32_t* argmax; WindowShape s;
    TETHER_HD void operator()(std::size_t p) const {
        const int ow = s.out_width(), oh = s.out_height(), c = s.channels;
        const int ox = int(p % ow), oy = int((p / ow) % oh);
        const std::size_t n = p / (std::size_t(ow) * oh);
        float* o = out + p * c;
        std::int32_t* a = argmax + p * c;
        for (int ky = 0; ky < s.kernel_h; ++ky)
            for (int kx = 0; kx < s.kernel_w; ++kx) {
                const std::size_t first =
                    ((n * s.height + std::size_t(oy * s.stride + ky)) * s.width + std::size_t(ox * s.stride + kx)) * c;
                const float* px = in + first;
                const bool initial = ky == 0 && kx == 0;
                // Branch-free selects, so the channel loop vectorizes (blends) on the CPU.
                for (int j = 0; j < c; ++j) {
                    const bool better = initial || px[j] > o[j];
                    o[j] = better ? px[j] : o[j];
                    a[j] = better ? std::int32_t(first + j) : a[j];
                }
            }
    }
};

// Max pooling with one unit per (output pixel, channel), for GPU threads (coalesced across
// channels); the same winner as MaxPool: the first of equal values in window order.
template <typename Index>
struct MaxPoolElement {
    const float* in; float* out; std::int32_t* argmax; WindowShape s;
    TETHER_HD void operator()(std::size_t index) const {
        const int c = s.channels;
        const Index i = Index(index), p = i / Index(c), ow = Index(s.out_width()), oh = Index(s.out_height());
        const int ch = int(i - p * Index(c));
        const int ox = int(p % ow), oy = int((p / ow) % oh);
        const std::size_t n = p / (ow * oh);
        float best = 0.f;
        std::int32_t where = 0;
        for (int ky = 0; ky < s.kernel_h; ++ky)
            for (int kx = 0; kx < s.kernel_w; ++kx) {
                const std::size_t at =
                    ((n * s.height + std::size_t(oy * s.stride + ky)) * s.width + std::size_t(ox * s.stride + kx)) * c + ch;
                if ((ky == 0 && kx == 0) || in[at] > best) {
                    best = in[at];
                    where = std::int32_t(at);
                }
            }
        out[index] = best;
        argmax[index] = where;
    }
};

// One unit = one output value: routes its gradient to the input that won its window. Windows
// do not overlap, so no two units write the same place; the caller zeroes din first.
struct MaxPoolBackward {
    const float* dout; const std::int32_t* argmax; float* din;
    TETHER_HD void operator()(std::size_t o) const { din[argmax[o]] = dout[o]; }
};

// SplitMix64 finaliser: a good 64-bit mix of (seed, index), the same on host and device.
TETHER_HD inline std::uint64_t mix64(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
struct DropoutMask {
    float* mask; float keep; std::uint64_t seed;
    TETHER_HD void operator()(std::size_t i) const {
        const std::uint64_t bits = mix64(seed + 0x9E3779B97F4A7C15ull * (std::uint64_t(i) + 1));
        const float uniform = float(bits >> 40) * (1.f / 16777216.f);  // 24 bits in [0, 1)
        mask[i] = uniform < keep ? 1.f / keep : 0.f;
    }
};
struct Multiply {
    float* out; const float* a; const float* b;
    TETHER_HD void operator()(std::size_t i) const { out[i] = a[i] * b[i]; }
};
// One unit = one row (a sample): its mean and variance, then the normalised values.
struct LayerNormRow {
    const float* in; float* out; float* xhat; float* inverse_std; const float* gamma; const float* beta;
    int cols; float epsilon;
    TETHER_HD void operator()(std::size_t r) const {
        const float* x = in + r * cols;
        float mean = 0.f, var = 0.f;
        for (int j = 0; j < cols; ++j) mean += x[j];
        mean /= float(cols);
        for (int j = 0; j < cols; ++j) var += (x[j] - mean) * (x[j] - mean);
        const float inv = 1.f / sqrtf(var / float(cols) + epsilon);
        inverse_std[r] = inv;
        float* h = xhat + r * cols;
        float* o = out + r * cols;
        for (int j = 0; j < cols; ++j) {
            h[j] = (x[j] - mean) * inv;
            o[j] = h[j] * gamma[j] + beta[j];
        }
    }
};
// din = inv_std * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * gamma.
struct LayerNormBackwardRow {
    const float* dout; const float* xhat; const float* inverse_std; const float* gamma; float* din; int cols;
    TETHER_HD void operator()(std::size_t r) const {
        const float* d = dout + r * cols;
        const float* h = xhat + r * cols;
        float mean_g = 0.f, mean_gh = 0.f;
        for (int j = 0; j < cols; ++j) {
            mean_g += d[j] * gamma[j];
            mean_gh += d[j] * gamma[j] * h[j];
        }
        mean_g /= float(cols);
        mean_gh /= float(cols);
        float* out = din + r * cols;
        for (int j = 0; j < cols; ++j) out[j] = inverse_std[r] * (d[j] * gamma[j] - mean_g - h[j] * mean_gh);
    }
};
struct Relu {
    float* out; const float* in;
    TETHER_HD void operator()(std::size_t i) const { out[i] = in[i] > 0.f ? in[i] : 0.f; }
};

}  // namespace tether::ops
