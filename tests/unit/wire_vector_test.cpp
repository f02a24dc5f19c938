// Both ends of a compressed direction (src/codec/wire_vector.hpp): error feedback makes the sum
// of what arrived follow the sum of the true updates, the receiver's copy of a state follows
// the state without drifting, slices (a vector's chunks) are decoded one by one, and a
// malformed or overflowing slice is refused without writing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "codec/wire_vector.hpp"
#include "random_vectors.hpp"

namespace {

using namespace tether;
using namespace tether::testing;
using Vec = std::vector<float>;

const CodecKind kLossy[] = {CodecKind::fp16, CodecKind::bf16, CodecKind::int8, CodecKind::topk};


using Bytes = std::vector<std::uint8_t>;

// x's slices of `chunk` elements (the last one shorter), encoded in order.
std::vector<Bytes> encode(WireSender& sender, const Vec& x, std::size_t chunk) {
    std::vector<Bytes> slices;
    for (std::size_t first = 0; first < x.size(); first += chunk) {
        const std::size_t count = std::min(chunk, x.size() - first);
        Bytes bytes(sender.max_encoded_bytes(count));
        bytes.resize(sender.encode(x.data(), first, count, bytes.data()));
        slices.push_back(std::move(bytes));
    }
    return slices;
}

// Sends x through sender and receiver, slice by slice, as the center and a worker do.
Vec carry(WireSender& sender, WireReceiver& receiver, const Vec& x, std::size_t chunk) {
    const std::vector<Bytes> slices = encode(sender, x, chunk);
    Vec out(x.size(), std::numeric_limits<float>::quiet_NaN());
    for (std::size_t k = 0; k < slices.size(); ++k)
        receiver.decode(slices[k].data(), slices[k].size(), k * chunk, std::min(chunk, x.size() - k * chunk), out.data());
    receiver.commit(out.data());
    return out;
}

}  // namespace

TEST_CASE("updates: error feedback keeps the sum of what arrived within one residual of the true sum") {
    const std::size_t n = 3000, chunk = 1024;  // three slices, the last one short
    for (CodecKind kind : kLossy) {
        CAPTURE(to_string(kind));
        const CodecOptions codec{kind, 0.05};
        WireSender sender(codec, WireVector::update, n);
        WireReceiver receiver(codec, WireVector::update, n);
        Vec true_sum(n, 0.f), arrived_sum(n, 0.f);
        double gap_at_10 = 0, gap_at_300 = 0;
        for (int t = 1; t <= 300; ++t) {
            const Vec g = gaussian(n, 100 + t, 0.1f, 0.02f);  // a shared direction, as gradients have
            const Vec arrived = carry(sender, receiver, g, chunk);
            for (std::size_t i = 0; i < n; ++i) true_sum[i] += g[i], arrived_sum[i] += arrived[i];
            const double relative = distance(true_sum, arrived_sum) / norm(true_sum);
            if (t == 10) gap_at_10 = relative;
            if (t == 300) gap_at_300 = relative;
        }
        // The gap is the residual, which stays bounded while the sums grow.
        CHECK(gap_at_300 < 0.5 * gap_at_10);
        CHECK(gap_at_300 < (kind == CodecKind::topk ? 0.2 : 1e-3));
    }
}

TEST_CASE("states: the receiver's copy follows the state, even through top-k, and does not drift") {
    const std::size_t n = 2000, chunk = 512;
    for (CodecKind kind : kLossy) {
        CAPTURE(to_string(kind));
        const CodecOptions codec{kind, 0.1};
        const Vec start = gaussian(n, 1, 1.f);
        WireSender sender(codec, WireVector::state, n);
        WireReceiver receiver(codec, WireVector::state, n);
        sender.reset(start.data());
        receiver.reset(start.data());
        Vec x = start, rebuilt;
        for (int t = 1; t <= 200; ++t) {
            const Vec step = gaussian(n, 500 + t, 1e-3f);
            for (std::size_t i = 0; i < n; ++i) x[i] += step[i];
            rebuilt = carry(sender, receiver, x, chunk);
        }
        // Sent as values, bf16 would be off by ~|x| / 512 ~ 2e-3 per element; sent as changes
        // from the copy, the error is a fraction of one step's change.
        const double rms_error = distance(rebuilt, x) / std::sqrt(double(n));
        CHECK(rms_error < (kind == CodecKind::topk ? 5e-3 : 2e-5));
        // Then the state stops moving: the copy converges to it (top-k sends what is left).
        for (int t = 0; t < 30; ++t) rebuilt = carry(sender, receiver, x, chunk);
        CHECK(distance(rebuilt, x) / std::sqrt(double(n)) < (kind == CodecKind::topk ? 1e-6 : 2e-5));
    }
}

TEST_CASE("a malformed or overflowing slice is refused and leaves the output untouched") {
    const std::size_t n = 600, chunk = 256;
    const CodecOptions codec{CodecKind::bf16};
    WireSender sender(codec, WireVector::state, n);
    WireReceiver receiver(codec, WireVector::state, n);
    const Vec zero(n, 0.f);
    sender.reset(zero.data());
    receiver.reset(zero.data());
    const Vec x = gaussian(n, 3, 1.f);
    const std::vector<Bytes> slices = encode(sender, x, chunk);
    REQUIRE(slices.size() == 3);
    CHECK(slices[0].size() == 2 * 256);
    CHECK(slices[2].size() == 2 * 88);
    Vec out(n, 7.f);
    const auto untouched = [&] {
        for (float v : out) REQUIRE(v == 7.f);
    };
    CHECK_THROWS_AS(receiver.decode(slices[0].data(), slices[0].size() - 2, 0, 256, out.data()), CodecError);  // short
    untouched();
    CHECK_THROWS_AS(receiver.decode(slices[2].data(), slices[2].size(), 0, 256, out.data()), CodecError);  // slice 2's size as slice 0
    untouched();
    CHECK_THROWS_AS(receiver.decode(slices[0].data(), slices[0].size(), 512, 256, out.data()), CodecError);  // past the end
    untouched();
    // Each element finite, the rebuilt state not: a copy near the float32 limit plus a change
    // as large.
    const Vec big(n, 3e38f);
    WireSender jump(codec, WireVector::state, n);
    jump.reset(zero.data());
    const std::vector<Bytes> huge = encode(jump, big, chunk);
    WireReceiver near_limit(codec, WireVector::state, n);
    near_limit.reset(big.data());
    CHECK_THROWS_WITH_AS(near_limit.decode(huge[0].data(), huge[0].size(), 0, 256, out.data()), doctest::Contains("overflows"),
                         CodecError);
    untouched();
    // The good slices still decode.
    for (std::size_t k = 0; k < 3; ++k)
        receiver.decode(slices[k].data(), slices[k].size(), k * chunk, std::min(chunk, n - k * chunk), out.data());
    for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == doctest::Approx(x[i]).epsilon(1.0 / 256));
}

TEST_CASE("float32 has no wire state, and a strategy that does not say what it sends gets none") {
    CHECK_THROWS_AS(WireSender({CodecKind::float32}, WireVector::update, 10), std::logic_error);
    CHECK_THROWS_AS(WireReceiver({CodecKind::int8}, WireVector::unknown, 10), std::logic_error);
}
