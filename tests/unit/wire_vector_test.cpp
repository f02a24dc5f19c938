// Both ends of a compressed direction (src/codec/wire_vector.hpp): error feedback makes the sum
// of what arrived follow the sum of the true updates, the receiver's copy of a state follows
// the state without drifting, frames are decoded one by one, and a malformed or overflowing
// frame is refused without writing.
#include <doctest/doctest.h>

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


// Sends x through sender and receiver, frame by frame, as the center and a worker do.
Vec carry(WireSender& sender, WireReceiver& receiver, const Vec& x) {
    const std::vector<Payload> frames = sender.encode(x.data());
    Vec out(x.size(), std::numeric_limits<float>::quiet_NaN());
    for (std::size_t f = 0; f < frames.size(); ++f) receiver.decode(f, frames[f].data(), frames[f].size(), out.data());
    receiver.commit(out.data());
    return out;
}

}  // namespace

TEST_CASE("updates: error feedback keeps the sum of what arrived within one residual of the true sum") {
    const std::size_t n = 3000, frame = 1024;  // three frames, the last one short
    for (CodecKind kind : kLossy) {
        CAPTURE(to_string(kind));
        const CodecOptions codec{kind, 0.05};
        WireSender sender(codec, WireVector::update, n, frame);
        WireReceiver receiver(codec, WireVector::update, n, frame);
        Vec true_sum(n, 0.f), arrived_sum(n, 0.f);
        double gap_at_10 = 0, gap_at_300 = 0;
        for (int t = 1; t <= 300; ++t) {
            const Vec g = gaussian(n, 100 + t, 0.1f, 0.02f);  // a shared direction, as gradients have
            const Vec arrived = carry(sender, receiver, g);
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
    const std::size_t n = 2000, frame = 512;
    for (CodecKind kind : kLossy) {
        CAPTURE(to_string(kind));
        const CodecOptions codec{kind, 0.1};
        const Vec start = gaussian(n, 1, 1.f);
        WireSender sender(codec, WireVector::state, n, frame);
        WireReceiver receiver(codec, WireVector::state, n, frame);
        sender.reset(start.data());
        receiver.reset(start.data());
        Vec x = start, rebuilt;
        for (int t = 1; t <= 200; ++t) {
            const Vec step = gaussian(n, 500 + t, 1e-3f);
            for (std::size_t i = 0; i < n; ++i) x[i] += step[i];
            rebuilt = carry(sender, receiver, x);
        }
        // Sent as values, bf16 would be off by ~|x| / 512 ~ 2e-3 per element; sent as changes
        // from the copy, the error is a fraction of one step's change.
        const double rms_error = distance(rebuilt, x) / std::sqrt(double(n));
        CHECK(rms_error < (kind == CodecKind::topk ? 5e-3 : 2e-5));
        // Then the state stops moving: the copy converges to it (top-k sends what is left).
        for (int t = 0; t < 30; ++t) rebuilt = carry(sender, receiver, x);
        CHECK(distance(rebuilt, x) / std::sqrt(double(n)) < (kind == CodecKind::topk ? 1e-6 : 2e-5));
    }
}

TEST_CASE("a malformed or overflowing frame is refused and leaves the output untouched") {
    const std::size_t n = 600, frame = 256;
    const CodecOptions codec{CodecKind::bf16};
    WireSender sender(codec, WireVector::state, n, frame);
    WireReceiver receiver(codec, WireVector::state, n, frame);
    const Vec zero(n, 0.f);
    sender.reset(zero.data());
    receiver.reset(zero.data());
    const Vec x = gaussian(n, 3, 1.f);
    const std::vector<Payload> frames = sender.encode(x.data());
    REQUIRE(frames.size() == 3);
    CHECK(frames[0].size() == 2 * 256);
    CHECK(frames[2].size() == 2 * 88);
    Vec out(n, 7.f);
    const auto untouched = [&] {
        for (float v : out) REQUIRE(v == 7.f);
    };
    CHECK_THROWS_AS(receiver.decode(0, frames[0].data(), frames[0].size() - 2, out.data()), CodecError);  // short
    untouched();
    CHECK_THROWS_AS(receiver.decode(0, frames[2].data(), frames[2].size(), out.data()), CodecError);  // frame 2's size as frame 0
    untouched();
    CHECK_THROWS_AS(receiver.decode(3, frames[0].data(), frames[0].size(), out.data()), CodecError);  // no frame 3
    untouched();
    // Each element finite, the rebuilt state not: a copy near the float32 limit plus a change
    // as large.
    const Vec big(n, 3e38f);
    WireSender jump(codec, WireVector::state, n, frame);
    jump.reset(zero.data());
    const std::vector<Payload> huge = jump.encode(big.data());
    WireReceiver near_limit(codec, WireVector::state, n, frame);
    near_limit.reset(big.data());
    CHECK_THROWS_WITH_AS(near_limit.decode(0, huge[0].data(), huge[0].size(), out.data()),
                         doctest::Contains("overflows"), CodecError);
    untouched();
    // The good frames still decode.
    for (std::size_t f = 0; f < 3; ++f) receiver.decode(f, frames[f].data(), frames[f].size(), out.data());
    for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == doctest::Approx(x[i]).epsilon(1.0 / 256));
}

TEST_CASE("float32 has no wire state, and a strategy that does not say what it sends gets none") {
    CHECK_THROWS_AS(WireSender({CodecKind::float32}, WireVector::update, 10, 10), std::logic_error);
    CHECK_THROWS_AS(WireReceiver({CodecKind::int8}, WireVector::unknown, 10, 10), std::logic_error);
    CHECK(dtype_of(CodecKind::int8) == Dtype::int8);
    CHECK(max_payload_bytes({CodecKind::bf16}, 1000) == 4000);                // float32 is larger
    CHECK(max_payload_bytes({CodecKind::topk, 1.0}, 1000) == 8 + 8 * 1000);  // top-k of everything
}
