// A center with a lossy codec (cluster.codec) refuses what does not decode, as strictly as
// float32: the wrong dtype or encoding flag, a size that does not fit the element count, a
// NaN, a top-k index out of range. Each is answered with an `error`, counted by reason, and
// leaves x~ untouched; the worker's next good exchange applies as usual.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>

#include "center_harness.hpp"
#include "codec/codec.hpp"

using namespace tether::testing;

namespace {

using tether::CodecKind;

// The values here are exact in bfloat16, so its bits are the float's upper half.
std::vector<std::uint8_t> bf16_bytes(const Vec& x) {
    std::vector<std::uint8_t> out;
    for (float v : x) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        const auto b = std::uint16_t(bits >> 16);
        out.push_back(std::uint8_t(b));
        out.push_back(std::uint8_t(b >> 8));
    }
    return out;
}

Header compressed(Dtype dtype, std::uint32_t flags, std::uint64_t sequence = 1) {
    Header h = exchange_header(sequence);
    h.dtype = dtype;
    h.flags |= flags;
    return h;
}

std::string refusal(Channel& worker, const Header& h, const std::vector<std::uint8_t>& payload) {
    worker.send(tether::encode(h), payload.data(), payload.size());
    return receive_error(worker);
}

// An aeasgd center (alpha 0.25) whose exchanges (x_i: states) come through `codec`.
CenterOptions with_codec(CodecKind codec) {
    CenterOptions o = options_for(1);
    o.updates.payload_codec = {codec, 1.0 / 3};  // top-k: one element of three
    o.updates.wire_kinds = {tether::WireVector::state, tether::WireVector::update};
    return o;
}

void check_untouched_then_served(ServedCenter& served, Channel& worker, std::uint64_t rejected,
                                 const std::vector<std::uint8_t>& good, Dtype dtype) {
    // The change from the center's copy (x~(0)) that brings x_i to (2, 0, 5).
    worker.send(tether::encode(compressed(dtype, tether::kFlagChangeFromCopy, 2)), good.data(), good.size());
    Frames frames;
    receive(worker, MessageType::reply, frames);
    send(worker, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(10000));
    const auto& stats = served.center().stats();
    CHECK(stats.rejected_total() == rejected);
    CHECK(stats.updates_applied == 1);
    CHECK(served.center().state().version == 1);
    return check_equal(served.center().state().x, {1.25f, -0.75f, 1.625f});  // e = 0.25 (x_i - x~) from x~(0)
}

}  // namespace

TEST_CASE("bf16 exchanges: wrong dtype, missing flag, wrong size and NaN are refused; x~ stays") {
    ServedCenter served(kAeasgd, with_codec(CodecKind::bf16));
    auto worker = served.connect("bf16-worker");
    join(*worker, 0, kInitial);
    const Vec change{1.f, 1.f, 4.5f};  // x_i - x~(0) for x_i = (2, 0, 5)
    const auto good = bf16_bytes(change);
    const std::uint32_t copy = tether::kFlagChangeFromCopy;
    CHECK(starts_with(refusal(*worker, compressed(Dtype::float32, copy), std::vector<std::uint8_t>(12)),
                      "wrong dtype: exchange payloads of this run are bf16 (cluster.codec), got float32"));
    CHECK(starts_with(refusal(*worker, compressed(Dtype::bf16, 0), good), "wrong encoding: "));
    CHECK(starts_with(refusal(*worker, compressed(Dtype::bf16, copy), {good.begin(), good.end() - 1}), "bad encoding: bf16: 5 bytes"));
    CHECK(starts_with(refusal(*worker, compressed(Dtype::bf16, copy), bf16_bytes({1.f, 1.f, 4.5f, 0.f})), "bad encoding: "));
    CHECK(starts_with(refusal(*worker, compressed(Dtype::bf16, copy), bf16_bytes({1.f, std::numeric_limits<float>::quiet_NaN(), 4.5f})),
                      "bad encoding: bf16: element 1 is not finite"));
    check_untouched_then_served(served, *worker, 5, good, Dtype::bf16);
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::bad_encoding) == 3);
}

TEST_CASE("int8 exchanges: a NaN scale and a truncated block are refused; x~ stays") {
    ServedCenter served(kAeasgd, with_codec(CodecKind::int8));
    auto worker = served.connect("int8-worker");
    join(*worker, 0, kInitial);
    const std::uint32_t copy = tether::kFlagChangeFromCopy;
    // One block: scale 4.5 / 127, then the three quantized values.
    auto message = [](float scale, std::vector<std::int8_t> q) {
        std::vector<std::uint8_t> bytes(4);
        std::memcpy(bytes.data(), &scale, 4);
        for (auto v : q) bytes.push_back(std::uint8_t(v));
        return bytes;
    };
    const float scale = 4.5f / 127;
    CHECK(starts_with(refusal(*worker, compressed(Dtype::int8, copy), message(std::numeric_limits<float>::infinity(), {28, 28, 127})),
                      "bad encoding: int8 scale: element 0 is not finite"));
    CHECK(starts_with(refusal(*worker, compressed(Dtype::int8, copy), message(scale, {28, 28})), "bad encoding: int8: 6 bytes"));
    // 28 steps of 4.5/127 is 0.992: x_i ~ (1.992, -0.008, 5), e = 0.25 (x_i - x~(0)).
    worker->send(tether::encode(compressed(Dtype::int8, copy, 2)), message(scale, {28, 28, 127}).data(), 7);
    Frames frames;
    receive(*worker, MessageType::reply, frames);
    send(*worker, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(10000));
    CHECK(served.center().stats().rejected_total() == 2);
    check_equal(served.center().state().x, {1.f + 0.25f * 28 * scale, -1.f + 0.25f * 28 * scale, 0.5f + 0.25f * 4.5f});
}

TEST_CASE("top-k exchanges: an index out of range, a count past the vector and a wrong length are refused; x~ stays") {
    ServedCenter served(kAeasgd, with_codec(CodecKind::topk));
    auto worker = served.connect("topk-worker");
    join(*worker, 0, kInitial);
    const std::uint32_t copy = tether::kFlagChangeFromCopy;
    auto message = [](std::uint32_t n, std::vector<std::uint32_t> indices, std::vector<float> values) {
        std::vector<std::uint8_t> bytes(8);
        const std::uint32_t counts[2] = {n, std::uint32_t(indices.size())};
        std::memcpy(bytes.data(), counts, 8);
        for (auto i : indices) bytes.insert(bytes.end(), reinterpret_cast<std::uint8_t*>(&i), reinterpret_cast<std::uint8_t*>(&i) + 4);
        for (auto v : values) bytes.insert(bytes.end(), reinterpret_cast<std::uint8_t*>(&v), reinterpret_cast<std::uint8_t*>(&v) + 4);
        return bytes;
    };
    CHECK(starts_with(refusal(*worker, compressed(Dtype::topk, copy), message(3, {3}, {4.5f})), "bad encoding: topk: index 3 out of range"));
    CHECK(starts_with(refusal(*worker, compressed(Dtype::topk, copy), message(3, {0, 1, 2, 0}, {1, 1, 1, 1})),
                      "bad encoding: topk: 4 elements sent for a vector of 3"));
    CHECK(starts_with(refusal(*worker, compressed(Dtype::topk, copy), message(4, {2}, {4.5f})),
                      "bad encoding: topk: the message encodes 4 elements, expected 3"));
    auto truncated = message(3, {2}, {4.5f});
    truncated.pop_back();
    CHECK(starts_with(refusal(*worker, compressed(Dtype::topk, copy), truncated), "bad encoding: topk: 15 bytes"));
    check_untouched_then_served(served, *worker, 4, message(3, {0, 1, 2}, {1.f, 1.f, 4.5f}), Dtype::topk);
}
