// Element-wise kernels of the convolution, pooling and dropout layers, as Thrust functors.
// Included by thrust_ops.inl, so g++ builds them for OpenMP and nvcc for CUDA from this one
// source. Images are NHWC: the channels of one pixel are contiguous, so each functor's unit
// of work is one pixel (or one window offset) and its inner loop runs over the channels.
#pragma once

#include <cstdint>

namespace tether::ops {

// One unit = (output position p, kernel offset ky, kx): copies that pixel's channels into
// columns[p][(ky * kernel_w + kx) * channels ...], or zeros where the window hangs over the pad.
struct Im2col {
    const float* images; float* columns; WindowShape s;
    TETHER_HD void operator()(std::size_t unit) const {
        const int taps = s.kernel_h * s.kernel_w;
        const std::size_t p = unit / taps;
        const int tap = int(unit % taps), ky = tap / s.kernel_w, kx = tap % s.kernel_w;
        const int ow = s.out_width(), oh = s.out_height();
        const int ox = int(p % ow), oy = int((p / ow) % oh), n = int(p / (std::size_t(ow) * oh));
        const int iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
        float* out = columns + p * (std::size_t(taps) * s.channels) + std::size_t(tap) * s.channels;
        if (iy < 0 || iy >= s.height || ix < 0 || ix >= s.width) {
            for (int c = 0; c < s.channels; ++c) out[c] = 0.f;
            return;
        }
        const float* in = images + ((std::size_t(n) * s.height + iy) * s.width + ix) * s.channels;
        for (int c = 0; c < s.channels; ++c) out[c] = in[c];
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

// One unit = one output pixel; all its channels.
struct MaxPool {
    const float* in; float* out; std::int32_t* argmax; WindowShape s;
    TETHER_HD void operator()(std::size_t p) const {
        const int ow = s.out_width(), oh = s.out_height();
        const int ox = int(p % ow), oy = int((p / ow) % oh);
        const std::size_t n = p / (std::size_t(ow) * oh);
        for (int c = 0; c < s.channels; ++c) {
            std::size_t best = ((n * s.height + std::size_t(oy) * s.stride) * s.width + std::size_t(ox) * s.stride) * s.channels + c;
            for (int ky = 0; ky < s.kernel_h; ++ky)
                for (int kx = 0; kx < s.kernel_w; ++kx) {
                    const std::size_t i =
                        ((n * s.height + std::size_t(oy * s.stride + ky)) * s.width + std::size_t(ox * s.stride + kx)) * s.channels + c;
                    if (in[i] > in[best]) best = i;
                }
            out[p * s.channels + c] = in[best];
            argmax[p * s.channels + c] = std::int32_t(best);
        }
    }
};

// One unit = one input pixel: it receives its window's gradient if it won that window.
struct MaxPoolBackward {
    const float* dout; const std::int32_t* argmax; float* din; WindowShape s;
    TETHER_HD void operator()(std::size_t pixel) const {
        const int ix = int(pixel % s.width), iy = int((pixel / s.width) % s.height);
        const std::size_t n = pixel / (std::size_t(s.width) * s.height);
        const int oy = iy / s.stride, ox = ix / s.stride;
        const bool pooled = oy < s.out_height() && ox < s.out_width();  // rows/columns cut off by rounding down
        const std::size_t o = ((n * s.out_height() + oy) * s.out_width() + ox) * s.channels;
        for (int c = 0; c < s.channels; ++c) {
            const std::size_t i = pixel * s.channels + c;
            din[i] = pooled && std::size_t(argmax[o + c]) == i ? dout[o + c] : 0.f;
        }
    }
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
struct Relu {
    float* out; const float* in;
    TETHER_HD void operator()(std::size_t i) const { out[i] = in[i] > 0.f ? in[i] : 0.f; }
};

}  // namespace tether::ops
