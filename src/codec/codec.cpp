#include "codec/codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace tether {
namespace {

std::uint32_t bits_of(float x) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}
float float_of(std::uint32_t b) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

void expect_bytes(std::size_t got, std::size_t expected, const char* codec, std::size_t n) {
    if (got != expected)
        throw CodecError(std::string(codec) + ": " + std::to_string(got) + " bytes cannot hold " + std::to_string(n) +
                         " elements (expected " + std::to_string(expected) + ")");
}

// Checks first, writes after: a bad message leaves `out` untouched.
void require_finite(const float* x, std::size_t n, const char* codec) {
    for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) throw CodecError(std::string(codec) + ": element " + std::to_string(i) + " is not finite");
}

class Float32Codec final : public Codec {
public:
    CodecKind kind() const override { return CodecKind::float32; }
    std::size_t max_encoded_bytes(std::size_t n) const override { return 4 * n; }
    std::size_t encode(const float* x, std::size_t n, std::uint8_t* out) const override {
        std::memcpy(out, x, 4 * n);
        return 4 * n;
    }
    void decode(const std::uint8_t* in, std::size_t bytes, std::size_t n, float* out) const override {
        expect_bytes(bytes, 4 * n, "float32", n);
        for (std::size_t i = 0; i < n; ++i) {
            std::uint32_t b;
            std::memcpy(&b, in + 4 * i, 4);
            if ((b & 0x7f800000u) == 0x7f800000u) throw CodecError("float32: element " + std::to_string(i) + " is not finite");
        }
        std::memcpy(out, in, bytes);
    }
};

// IEEE binary16 with round to nearest even; overflow goes to infinity, tiny values to
// subnormal halves or zero, NaN to a quiet NaN. Branch-free (each case computed, one kept), so
// the codec's loops vectorize: updates are small, and a branchy subnormal path cost ~15 ns an
// element. The subnormal case rounds through a float addition, f + 0.5, whose result is a
// normal float, so flush-to-zero does not change it (F. Giesen's float_to_half_fast3_rtne).
// first ? a : second ? b : c, with masks: the compiler keeps conditional moves and vector
// blends, where a branch mispredicts on data that mixes the cases (small updates do).
inline std::uint32_t select3(bool first, std::uint32_t a, bool second, std::uint32_t b, std::uint32_t c) {
    const std::uint32_t take_a = 0u - std::uint32_t(first), take_b = ~take_a & (0u - std::uint32_t(second));
    return (a & take_a) | (b & take_b) | (c & ~(take_a | take_b));
}

inline std::uint16_t to_half(float x) {
    const std::uint32_t bits = bits_of(x);
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    const std::uint32_t f = bits & 0x7fffffffu;
    const std::uint32_t special = f > 0x7f800000u ? 0x7e00u : 0x7c00u;           // NaN, or Inf and overflow
    const std::uint32_t subnormal = bits_of(float_of(f) + 0.5f) - 0x3f000000u;    // below 2^-14: rounded by the FPU
    const std::uint32_t normal = (f - 0x38000000u + 0xfffu + ((f >> 13) & 1u)) >> 13;  // exponent 127 -> 15, rounded to even
    return std::uint16_t(sign | select3(f >= 0x47800000u, special, f < 0x38800000u, subnormal, normal));
}

inline float from_half(std::uint16_t h) {
    const std::uint32_t shifted = std::uint32_t(h & 0x7fffu) << 13;
    const std::uint32_t exponent = shifted & 0x0f800000u;
    const std::uint32_t rebased = shifted + 0x38000000u;                          // exponent 15 -> 127
    const std::uint32_t special = rebased + 0x38000000u;                          // Inf and NaN: exponent 255
    const std::uint32_t subnormal = bits_of(float_of(rebased + 0x00800000u) - 6.103515625e-05f);  // m * 2^-24, a normal float
    const std::uint32_t magnitude = select3(exponent == 0x0f800000u, special, exponent == 0, subnormal, rebased);
    return float_of(magnitude | (std::uint32_t(h & 0x8000u) << 16));
}

inline std::uint16_t to_bfloat16(float x) {
    const std::uint32_t f = bits_of(x);
    if ((f & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((f >> 16) | 0x40u);  // NaN stays NaN
    return std::uint16_t((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

inline float from_bfloat16(std::uint16_t b) { return float_of(std::uint32_t(b) << 16); }

// fp16 and bf16: two bytes per element through a conversion pair. `special` is the exponent
// mask of Inf and NaN, checked on the input before anything is written (no scratch copy: a
// vector of n floats per message cost a page-faulting allocation each time).
template <std::uint16_t (*Encode)(float), float (*Decode)(std::uint16_t), std::uint16_t special, CodecKind Kind>
class HalfWidthCodec final : public Codec {
public:
    CodecKind kind() const override { return Kind; }
    std::size_t max_encoded_bytes(std::size_t n) const override { return 2 * n; }
    std::size_t encode(const float* x, std::size_t n, std::uint8_t* out) const override {
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint16_t h = Encode(x[i]);
            out[2 * i] = std::uint8_t(h);
            out[2 * i + 1] = std::uint8_t(h >> 8);
        }
        return 2 * n;
    }
    void decode(const std::uint8_t* in, std::size_t bytes, std::size_t n, float* out) const override {
        expect_bytes(bytes, 2 * n, to_string(Kind), n);
        std::uint32_t any_special = 0;
        for (std::size_t i = 0; i < n; ++i) any_special |= (half_at(in, i) & special) == special;
        if (any_special)
            for (std::size_t i = 0; i < n; ++i)
                if ((half_at(in, i) & special) == special)
                    throw CodecError(std::string(to_string(Kind)) + ": element " + std::to_string(i) + " is not finite");
        for (std::size_t i = 0; i < n; ++i) out[i] = Decode(half_at(in, i));
    }

private:
    static std::uint16_t half_at(const std::uint8_t* in, std::size_t i) { return std::uint16_t(in[2 * i] | (in[2 * i + 1] << 8)); }
};

// The block codecs (int8, int4): a float32 scale per block, max|x| / levels, written at
// `scale_at`; returns its inverse. A subnormal scale has no finite inverse (0 x inf would be
// NaN): such a block encodes as zeros.
inline float write_block_scale(const float* x, std::size_t first, std::size_t last, float levels, std::uint8_t* scale_at) {
    float peak = 0.f;
    for (std::size_t i = first; i < last; ++i) peak = std::max(peak, std::fabs(x[i]));
    const float scale = peak / levels;
    std::memcpy(scale_at, &scale, 4);
    return scale >= std::numeric_limits<float>::min() ? 1.f / scale : 0.f;
}

// Round half away from zero, as lround, but inline, so that the caller's loop vectorizes.
inline float round_away(float scaled) { return std::trunc(scaled + (scaled >= 0.f ? 0.5f : -0.5f)); }

// The `blocks` scales at the start of a block codec's message, checked.
std::vector<float> read_block_scales(const std::uint8_t* in, std::size_t blocks, const char* what) {
    std::vector<float> scales(blocks);
    std::memcpy(scales.data(), in, blocks * 4);
    require_finite(scales.data(), blocks, what);
    return scales;
}

// Layout: one float32 scale per block of 256, then one int8 per element.
class Int8Codec final : public Codec {
public:
    static constexpr std::size_t kBlock = 256;
    CodecKind kind() const override { return CodecKind::int8; }
    std::size_t max_encoded_bytes(std::size_t n) const override { return blocks(n) * 4 + n; }
    std::size_t encode(const float* x, std::size_t n, std::uint8_t* out) const override {
        std::int8_t* q = reinterpret_cast<std::int8_t*>(out + blocks(n) * 4);
        for (std::size_t b = 0; b < blocks(n); ++b) {
            const std::size_t first = b * kBlock, last = std::min(n, first + kBlock);
            const float inverse = write_block_scale(x, first, last, 127.f, out + 4 * b);
            // |x| * inverse <= 127 (a hair more by rounding): the clamp only guards that hair.
            for (std::size_t i = first; i < last; ++i) q[i] = std::int8_t(std::clamp(round_away(x[i] * inverse), -127.f, 127.f));
        }
        return max_encoded_bytes(n);
    }
    void decode(const std::uint8_t* in, std::size_t bytes, std::size_t n, float* out) const override {
        expect_bytes(bytes, max_encoded_bytes(n), "int8", n);
        const std::vector<float> scales = read_block_scales(in, blocks(n), "int8 scale");
        const std::int8_t* q = reinterpret_cast<const std::int8_t*>(in + scales.size() * 4);
        for (std::size_t i = 0; i < n; ++i) out[i] = float(q[i]) * scales[i / kBlock];
    }

private:
    static std::size_t blocks(std::size_t n) { return (n + kBlock - 1) / kBlock; }
};

// Layout: one float32 scale per block of 64, then two elements per byte (element 2j in the low
// nibble), each q + 8 with q = round(x / scale) in [-7, 7] and scale = max|x| / 7. The
// smaller block than int8's keeps one large element from flattening many small ones to zero:
// 15 levels leave little room. Streaming DiLoCo's 4-bit outer gradients (Douillard et al.
// 2025 use a 4-bit float); a state's change goes out, the rest stays with the sender's copy.
class Int4Codec final : public Codec {
public:
    static constexpr std::size_t kBlock = 64;
    CodecKind kind() const override { return CodecKind::int4; }
    std::size_t max_encoded_bytes(std::size_t n) const override { return blocks(n) * 4 + (n + 1) / 2; }
    std::size_t encode(const float* x, std::size_t n, std::uint8_t* out) const override {
        std::uint8_t* q = out + blocks(n) * 4;
        std::memset(q, 0, (n + 1) / 2);
        for (std::size_t b = 0; b < blocks(n); ++b) {
            const std::size_t first = b * kBlock, last = std::min(n, first + kBlock);
            const float inverse = write_block_scale(x, first, last, 7.f, out + 4 * b);
            for (std::size_t i = first; i < last; ++i)
                q[i / 2] |= std::uint8_t(int(std::clamp(round_away(x[i] * inverse), -7.f, 7.f)) + 8) << (4 * (i % 2));
        }
        return max_encoded_bytes(n);
    }
    void decode(const std::uint8_t* in, std::size_t bytes, std::size_t n, float* out) const override {
        expect_bytes(bytes, max_encoded_bytes(n), "int4", n);
        const std::vector<float> scales = read_block_scales(in, blocks(n), "int4 scale");
        const std::uint8_t* q = in + scales.size() * 4;
        // The encoder writes q + 8 in [1, 15], and a zero nibble after an odd element count.
        for (std::size_t i = 0; i < n; ++i)
            if (nibble(q, i) == 0) throw CodecError("int4: element " + std::to_string(i) + " is nibble 0, which no encoder writes");
        if (n % 2 == 1 && nibble(q, n) != 0)
            throw CodecError("int4: the padding nibble after element " + std::to_string(n - 1) + " is not 0");
        for (std::size_t i = 0; i < n; ++i) out[i] = float(nibble(q, i) - 8) * scales[i / kBlock];
    }

private:
    static std::size_t blocks(std::size_t n) { return (n + kBlock - 1) / kBlock; }
    static int nibble(const std::uint8_t* q, std::size_t i) { return (q[i / 2] >> (4 * (i % 2))) & 0xf; }
};

// Layout: uint32 element count n (top-k alone could not tell a shorter vector from a longer
// one), uint32 count k, then k uint32 indices (ascending), then k float32 values.
class TopKCodec final : public Codec {
public:
    explicit TopKCodec(double ratio) : ratio_(ratio) {}
    CodecKind kind() const override { return CodecKind::topk; }
    std::size_t max_encoded_bytes(std::size_t n) const override { return 8 + 8 * kept(n); }
    std::size_t encode(const float* x, std::size_t n, std::uint8_t* out) const override {
        const std::size_t k = kept(n);
        std::vector<std::uint32_t> order(n);
        std::iota(order.begin(), order.end(), 0u);
        std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                         [&](std::uint32_t a, std::uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
        std::sort(order.begin(), order.begin() + std::ptrdiff_t(k));  // ascending indices: cache-friendly decode
        const std::uint32_t header[2] = {std::uint32_t(n), std::uint32_t(k)};
        std::memcpy(out, header, 8);
        for (std::size_t j = 0; j < k; ++j) {
            const std::uint32_t i = order[j];
            std::memcpy(out + 8 + 4 * j, &i, 4);
            std::memcpy(out + 8 + 4 * k + 4 * j, &x[i], 4);
        }
        return 8 + 8 * k;
    }
    void decode(const std::uint8_t* in, std::size_t bytes, std::size_t n, float* out) const override {
        if (bytes < 8) throw CodecError("topk: " + std::to_string(bytes) + " bytes hold no element counts");
        std::uint32_t header[2];
        std::memcpy(header, in, 8);
        if (header[0] != n)
            throw CodecError("topk: the message encodes " + std::to_string(header[0]) + " elements, expected " + std::to_string(n));
        const std::size_t count = header[1];
        if (count > n) throw CodecError("topk: " + std::to_string(count) + " elements sent for a vector of " + std::to_string(n));
        expect_bytes(bytes, 8 + 8 * count, "topk", count);
        std::vector<std::uint32_t> indices(count);
        std::vector<float> values(count);
        std::memcpy(indices.data(), in + 8, 4 * count);
        std::memcpy(values.data(), in + 8 + 4 * count, 4 * count);
        for (std::uint32_t i : indices)
            if (i >= n) throw CodecError("topk: index " + std::to_string(i) + " out of range for " + std::to_string(n) + " elements");
        require_finite(values.data(), count, "topk");
        std::fill(out, out + n, 0.f);
        for (std::size_t j = 0; j < count; ++j) out[indices[j]] = values[j];
    }
private:
    std::size_t kept(std::size_t n) const {
        return n == 0 ? 0 : std::max<std::size_t>(1, std::min(n, std::size_t(std::ceil(ratio_ * double(n)))));
    }
    double ratio_;
};

}  // namespace

const char* to_string(CodecKind kind) {
    switch (kind) {
        case CodecKind::float32: return "float32";
        case CodecKind::fp16: return "fp16";
        case CodecKind::bf16: return "bf16";
        case CodecKind::int8: return "int8";
        case CodecKind::topk: return "topk";
        case CodecKind::int4: return "int4";
    }
    return "unknown";
}

CodecKind codec_kind(const std::string& name) {
    for (CodecKind k : {CodecKind::float32, CodecKind::fp16, CodecKind::bf16, CodecKind::int8, CodecKind::int4, CodecKind::topk})
        if (name == to_string(k)) return k;
    throw std::invalid_argument("\"" + name + "\" is not a codec; expected float32, fp16, bf16, int8, int4 or topk");
}

std::unique_ptr<Codec> make_codec(const CodecOptions& o) {
    switch (o.kind) {
        case CodecKind::float32: return std::make_unique<Float32Codec>();
        case CodecKind::fp16: return std::make_unique<HalfWidthCodec<to_half, from_half, 0x7c00, CodecKind::fp16>>();
        case CodecKind::bf16:
            return std::make_unique<HalfWidthCodec<to_bfloat16, from_bfloat16, 0x7f80, CodecKind::bf16>>();
        case CodecKind::int8: return std::make_unique<Int8Codec>();
        case CodecKind::int4: return std::make_unique<Int4Codec>();
        case CodecKind::topk:
            if (!(o.topk_ratio > 0.0 && o.topk_ratio <= 1.0))
                throw std::invalid_argument("topk ratio " + std::to_string(o.topk_ratio) + " must be > 0 and <= 1");
            return std::make_unique<TopKCodec>(o.topk_ratio);
    }
    throw std::invalid_argument("unknown codec");
}

}  // namespace tether
