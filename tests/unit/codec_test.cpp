// The codecs (src/codec/codec.hpp): round-trip error within each format's bound, and decoders
// that refuse malformed input without writing. Error feedback: wire_vector_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "codec/codec.hpp"

namespace {

using namespace tether;
using Vec = std::vector<float>;

Vec random_vector(std::size_t n, std::uint64_t seed, float scale = 1.f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, scale);
    Vec v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

Vec round_trip(Codec& codec, const Vec& x, std::size_t* bytes = nullptr) {
    std::vector<std::uint8_t> wire(codec.max_encoded_bytes(x.size()));
    const std::size_t used = codec.encode(x.data(), x.size(), wire.data());
    if (bytes) *bytes = used;
    Vec out(x.size());
    codec.decode(wire.data(), used, x.size(), out.data());
    return out;
}

}  // namespace

TEST_CASE("fp16 and bf16 round trips stay within half a unit in the last place") {
    const Vec x = random_vector(10000, 1, 3.f);
    for (auto [kind, relative] : {std::pair{CodecKind::fp16, 1.0 / 2048}, std::pair{CodecKind::bf16, 1.0 / 256}}) {
        CAPTURE(to_string(kind));
        auto codec = make_codec({kind});
        std::size_t bytes = 0;
        const Vec y = round_trip(*codec, x, &bytes);
        CHECK(bytes == 2 * x.size());  // half the bytes of float32
        for (std::size_t i = 0; i < x.size(); ++i)
            if (std::fabs(x[i]) > 1e-4f) CHECK(std::fabs(y[i] - x[i]) <= relative * std::fabs(x[i]) * 1.0001);
    }
}

TEST_CASE("half and bfloat16 conversions: exact values, rounding to even, range ends") {
    const auto fp16 = make_codec({CodecKind::fp16}), bf16 = make_codec({CodecKind::bf16});
    const auto through = [](Codec& codec, float v) { return round_trip(codec, {v}).front(); };
    for (float v : {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.103515625e-05f /* smallest normal half */, 5.9604645e-08f /* smallest subnormal */})
        CHECK(through(*fp16, v) == v);
    CHECK(through(*fp16, 1.f + 1.f / 2048) == 1.f);                   // halfway: to even (down)
    CHECK(through(*fp16, 1.f + 3.f / 2048) == 1.f + 2.f / 1024);      // halfway: to even (up)
    CHECK_THROWS_AS(through(*fp16, 70000.f), CodecError);             // beyond the range: inf, refused as not finite
    CHECK(through(*fp16, 1e-9f) == 0.f);
    CHECK(through(*bf16, 1.f) == 1.f);
    CHECK(through(*bf16, 1.f + 1.f / 256) == 1.f);  // halfway: to even
    CHECK_THROWS_AS(through(*bf16, std::numeric_limits<float>::quiet_NaN()), CodecError);  // stays NaN, refused
}

TEST_CASE("int8 with a scale per block of 256: error at most half a step, a quarter of the bytes") {
    Vec x = random_vector(1000, 2);
    for (std::size_t i = 256; i < 512; ++i) x[i] = 0.f;  // an all-zero block stays exactly zero
    auto codec = make_codec({CodecKind::int8});
    std::size_t bytes = 0;
    const Vec y = round_trip(*codec, x, &bytes);
    CHECK(bytes == 1000 + 4 * 4);
    for (std::size_t block = 0; block < 4; ++block) {
        float peak = 0.f;
        for (std::size_t i = block * 256; i < std::min<std::size_t>(1000, (block + 1) * 256); ++i) peak = std::max(peak, std::fabs(x[i]));
        const float step = peak / 127.f;
        for (std::size_t i = block * 256; i < std::min<std::size_t>(1000, (block + 1) * 256); ++i)
            CHECK(std::fabs(y[i] - x[i]) <= 0.5f * step * 1.001f + 1e-7f);
    }
    for (std::size_t i = 256; i < 512; ++i) CHECK(y[i] == 0.f);
}

TEST_CASE("int4 with a scale per block of 64: error at most half of max|x| / 7, about an eighth of the bytes") {
    Vec x = random_vector(1001, 5);  // odd: the last byte holds one element
    for (std::size_t i = 64; i < 128; ++i) x[i] = 0.f;  // an all-zero block stays exactly zero
    x[200] = 40.f;  // one large element costs its own block only
    auto codec = make_codec({CodecKind::int4});
    std::size_t bytes = 0;
    const Vec y = round_trip(*codec, x, &bytes);
    CHECK(bytes == 501 + 16 * 4);
    for (std::size_t first = 0; first < x.size(); first += 64) {
        const std::size_t last = std::min(x.size(), first + 64);
        float peak = 0.f;
        for (std::size_t i = first; i < last; ++i) peak = std::max(peak, std::fabs(x[i]));
        for (std::size_t i = first; i < last; ++i) CHECK(std::fabs(y[i] - x[i]) <= 0.5f * peak / 7.f * 1.001f + 1e-7f);
    }
    for (std::size_t i = 64; i < 128; ++i) CHECK(y[i] == 0.f);
    CHECK(y[200] == doctest::Approx(40.f));
    CHECK(std::fabs(y[300] - x[300]) <= 0.5f);  // another block: its own, smaller scale
    CHECK(codec_kind("int4") == CodecKind::int4);
    // Malformed: a nibble the encoder never writes, a padding nibble that is not 0.
    std::vector<std::uint8_t> wire(codec->max_encoded_bytes(x.size()));
    const std::size_t used = codec->encode(x.data(), x.size(), wire.data());
    Vec out(x.size(), 7.f);
    std::vector<std::uint8_t> bad = wire;
    bad[16 * 4 + 3] &= 0xf0;  // element 6: nibble 0
    CHECK_THROWS_WITH_AS(codec->decode(bad.data(), used, x.size(), out.data()), doctest::Contains("element 6"), CodecError);
    bad = wire;
    bad.back() |= 0x10;
    CHECK_THROWS_WITH_AS(codec->decode(bad.data(), used, x.size(), out.data()), doctest::Contains("padding"), CodecError);
    CHECK(out == Vec(x.size(), 7.f));
    // A block whose peak is subnormal has no finite inverse scale: it encodes as zeros.
    const Vec tiny = {1e-39f, 0.f, -1e-39f};
    CHECK(round_trip(*codec, tiny) == Vec(3, 0.f));
    CHECK(round_trip(*make_codec({CodecKind::int8}), tiny) == Vec(3, 0.f));
}

TEST_CASE("top-k sends the k largest magnitudes and nothing else") {
    auto codec = make_codec({CodecKind::topk, 0.05});
    const std::size_t n = 2000;
    // One step: exactly the 5% largest |x| arrive, the rest is zero.
    Vec x = random_vector(n, 3);
    std::size_t bytes = 0;
    Vec sent = round_trip(*codec, x, &bytes);
    CHECK(bytes == 8 + 8 * 100);
    std::size_t nonzero = 0;
    float smallest_sent = 1e30f, largest_kept = 0.f;
    for (std::size_t i = 0; i < n; ++i) {
        if (sent[i] != 0.f) {
            ++nonzero;
            CHECK(sent[i] == x[i]);
            smallest_sent = std::min(smallest_sent, std::fabs(x[i]));
        } else {
            largest_kept = std::max(largest_kept, std::fabs(x[i]));
        }
    }
    CHECK(nonzero == 100);
    CHECK(smallest_sent >= largest_kept);
    // Stateless: the same input gives the same message (error feedback is the caller's,
    // codec/wire_vector.hpp).
    CHECK(round_trip(*codec, x) == sent);
}

TEST_CASE("decoders refuse malformed input and leave the output untouched") {
    const Vec x = random_vector(300, 4);
    Vec out(300, 7.f);
    const auto untouched = [&] {
        for (float v : out) REQUIRE(v == 7.f);
    };
    for (CodecKind kind : {CodecKind::float32, CodecKind::fp16, CodecKind::bf16, CodecKind::int8, CodecKind::int4,
                           CodecKind::topk}) {
        CAPTURE(to_string(kind));
        auto codec = make_codec({kind, 0.1});
        std::vector<std::uint8_t> wire(codec->max_encoded_bytes(x.size()));
        const std::size_t used = codec->encode(x.data(), x.size(), wire.data());
        CHECK_THROWS_AS(codec->decode(wire.data(), used - 1, x.size(), out.data()), CodecError);  // truncated
        untouched();
        CHECK_THROWS_AS(codec->decode(wire.data(), used, x.size() + 1, out.data()), CodecError);  // wrong count
        untouched();
    }
    // A top-k index past the end, and a NaN value.
    auto topk = make_codec({CodecKind::topk, 0.1});
    std::vector<std::uint8_t> wire(topk->max_encoded_bytes(300));
    const std::size_t used = topk->encode(x.data(), 300, wire.data());
    std::vector<std::uint8_t> bad = wire;
    const std::uint32_t past_end = 300;
    std::memcpy(bad.data() + 8, &past_end, 4);
    CHECK_THROWS_WITH_AS(topk->decode(bad.data(), used, 300, out.data()), doctest::Contains("out of range"), CodecError);
    untouched();
    bad = wire;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bad.data() + 8 + 4 * 30, &nan, 4);
    CHECK_THROWS_WITH_AS(topk->decode(bad.data(), used, 300, out.data()), doctest::Contains("not finite"), CodecError);
    untouched();
    CHECK_THROWS_AS(codec_kind("fp8"), std::invalid_argument);
    CHECK(codec_kind("bf16") == CodecKind::bf16);
}
