// The wire header: every field survives encode/decode, the encoding is the documented 80-byte
// little-endian layout, and decode refuses anything malformed with a machine-readable reason.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/header.hpp"
#include "transport/payload.hpp"

namespace {

using tether::Dtype;
using tether::Header;
using tether::MessageType;

Header every_field_set() {
    Header h;
    h.type = MessageType::exchange;
    h.dtype = Dtype::float32;
    h.worker_id = 0xA1B2C3D4u;
    h.flags = tether::kFlagLastChunk | 0x80000000u;
    h.sequence = 0x0102030405060708ull;
    h.center_version = 0x1112131415161718ull;
    h.local_step = 0x2122232425262728ull;
    h.samples = 0x3132333435363738ull;
    h.chunk_index = 6;
    h.chunk_count = 7;
    h.element_count = 0x4142434445464748ull;
    h.fingerprint = 0xF1F2F3F4F5F6F7F8ull;
    h.error_code = tether::ErrorCode::id_taken;
    return h;
}

// Decodes `bytes`; returns the failure reason, or "" when the header is accepted.
std::string decode_reason(const std::vector<std::uint8_t>& bytes) {
    tether::ErrorCode reason = tether::ErrorCode::none;
    const auto h = tether::decode(bytes.data(), bytes.size(), reason);
    if (h) return "";
    CHECK(reason != tether::ErrorCode::none);
    return tether::to_string(reason);
}

void put_u32(std::vector<std::uint8_t>& bytes, std::size_t offset, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) bytes.at(offset + std::size_t(i)) = std::uint8_t(value >> (8 * i));
}

// Byte offsets of the fields, from the order header.cpp writes them in.
constexpr std::size_t kMagicAt = 0, kVersionAt = 4, kTypeAt = 6, kDtypeAt = 7, kChunkIndexAt = 48, kChunkCountAt = 52;

}  // namespace

TEST_CASE("encode writes 80 bytes that decode to the same header, field by field") {
    const Header in = every_field_set();
    const std::vector<std::uint8_t> bytes = tether::encode(in);
    REQUIRE(bytes.size() == tether::kHeaderBytes);
    REQUIRE(tether::kHeaderBytes == 80);

    tether::ErrorCode reason = tether::ErrorCode::none;
    const auto out = tether::decode(bytes.data(), bytes.size(), reason);
    REQUIRE_MESSAGE(out.has_value(), tether::to_string(reason));
    CHECK(out->type == in.type);
    CHECK(out->dtype == in.dtype);
    CHECK(out->worker_id == in.worker_id);
    CHECK(out->flags == in.flags);
    CHECK(out->sequence == in.sequence);
    CHECK(out->center_version == in.center_version);
    CHECK(out->local_step == in.local_step);
    CHECK(out->samples == in.samples);
    CHECK(out->chunk_index == in.chunk_index);
    CHECK(out->chunk_count == in.chunk_count);
    CHECK(out->element_count == in.element_count);
    CHECK(out->fingerprint == in.fingerprint);
    CHECK(out->error_code == in.error_code);
}

TEST_CASE("an error's kind travels as its code, one of the table's, and names its reason") {
    Header h;
    h.type = MessageType::error;
    h.error_code = tether::ErrorCode::unknown_worker;
    std::vector<std::uint8_t> bytes = tether::encode(h);
    tether::ErrorCode reason = tether::ErrorCode::none;
    CHECK(tether::decode(bytes.data(), bytes.size(), reason)->error_code == tether::ErrorCode::unknown_worker);
    put_u32(bytes, 72, 9999);  // not a code of this protocol version
    CHECK_FALSE(tether::decode(bytes.data(), bytes.size(), reason));
    CHECK(reason == tether::ErrorCode::unknown_error_code);
    CHECK(std::string(tether::to_string(tether::ErrorCode::id_taken)) == "id taken");
}

TEST_CASE("every message type and dtype round-trips") {
    for (auto type : {MessageType::hello, MessageType::welcome, MessageType::exchange, MessageType::reply,
                      MessageType::heartbeat, MessageType::bye, MessageType::error})
        for (auto dtype : {Dtype::none, Dtype::float32, Dtype::utf8}) {
            Header h;
            h.type = type;
            h.dtype = dtype;
            const auto bytes = tether::encode(h);
            tether::ErrorCode reason = tether::ErrorCode::none;
            const auto out = tether::decode(bytes.data(), bytes.size(), reason);
            CAPTURE(tether::to_string(type));
            REQUIRE(out.has_value());
            CHECK(out->type == type);
            CHECK(out->dtype == dtype);
        }
    CHECK(std::string(tether::to_string(MessageType::exchange)) == "exchange");
    CHECK(std::string(tether::to_string(MessageType::error)) == "error");
}

TEST_CASE("the encoding is little-endian, magic \"TETH\" first") {
    const auto bytes = tether::encode(every_field_set());
    CHECK(std::string(bytes.begin(), bytes.begin() + 4) == "TETH");
    CHECK(bytes[kVersionAt] == std::uint8_t(tether::kProtocolVersion));
    CHECK(bytes[kVersionAt + 1] == 0);
    CHECK(bytes[kTypeAt] == std::uint8_t(MessageType::exchange));
    CHECK(bytes[kDtypeAt] == std::uint8_t(Dtype::float32));
    CHECK(bytes[8] == 0xD4);  // worker_id, least significant byte first
    CHECK(bytes[11] == 0xA1);
    CHECK(bytes[kChunkIndexAt] == 6);
    CHECK(bytes[kChunkCountAt] == 7);
    CHECK(bytes[64] == 0xF8);  // fingerprint, the last field
    CHECK(bytes[71] == 0xF1);
}

TEST_CASE("decode rejects a malformed header with the documented reason") {
    const std::vector<std::uint8_t> good = tether::encode(every_field_set());
    REQUIRE(decode_reason(good).empty());

    SUBCASE("short header") {
        CHECK(decode_reason({}) == "short header");
        CHECK(decode_reason(std::vector<std::uint8_t>(good.begin(), good.end() - 1)) == "short header");
    }
    SUBCASE("long header") {
        auto bytes = good;
        bytes.push_back(0);
        CHECK(decode_reason(bytes) == "long header");
    }
    SUBCASE("bad magic") {
        auto bytes = good;
        put_u32(bytes, kMagicAt, 0x54455448);  // "HTET": the magic byte-swapped
        CHECK(decode_reason(bytes) == "bad magic");
    }
    SUBCASE("wrong protocol version") {
        auto bytes = good;
        bytes[kVersionAt] = std::uint8_t(tether::kProtocolVersion + 1);
        CHECK(decode_reason(bytes) == "protocol version");
        bytes[kVersionAt] = 0;
        CHECK(decode_reason(bytes) == "protocol version");
    }
    SUBCASE("unknown type") {
        auto bytes = good;
        bytes[kTypeAt] = 0;
        CHECK(decode_reason(bytes) == "unknown type");
        bytes[kTypeAt] = std::uint8_t(MessageType::lease);  // the last one known: lease
        CHECK(decode_reason(bytes).empty());
        bytes[kTypeAt] = std::uint8_t(MessageType::lease) + 1;
        CHECK(decode_reason(bytes) == "unknown type");
        bytes[kTypeAt] = 0xFF;
        CHECK(decode_reason(bytes) == "unknown type");
    }
    SUBCASE("unknown dtype") {
        auto bytes = good;
        bytes[kDtypeAt] = std::uint8_t(Dtype::int4);  // the last one known: the codecs
        CHECK(decode_reason(bytes).empty());
        bytes[kDtypeAt] = std::uint8_t(Dtype::int4) + 1;
        CHECK(decode_reason(bytes) == "unknown dtype");
        bytes[kDtypeAt] = 0xFF;
        CHECK(decode_reason(bytes) == "unknown dtype");
    }
    SUBCASE("bad chunk") {
        auto bytes = good;
        put_u32(bytes, kChunkIndexAt, 7);  // == chunk_count
        CHECK(decode_reason(bytes) == "bad chunk");
        put_u32(bytes, kChunkIndexAt, 8);  // > chunk_count
        CHECK(decode_reason(bytes) == "bad chunk");
        put_u32(bytes, kChunkIndexAt, 0);
        put_u32(bytes, kChunkCountAt, 0);
        CHECK(decode_reason(bytes) == "bad chunk");
        put_u32(bytes, kChunkCountAt, 1);
        CHECK(decode_reason(bytes).empty());
    }
}

using tether::Payload;
using tether::RecycledPayloads;

// A worker's messages come from two recycled buffers (transport/payload.hpp); a GPU worker's
// are made by an allocator that page-locks them, so it must run only when a buffer is new.
TEST_CASE("RecycledPayloads refills only buffers nobody holds, and makes new ones with its allocator") {
    RecycledPayloads payloads;
    int made = 0;
    payloads.allocate_with([&](std::size_t bytes) {
        ++made;
        return Payload::allocate(bytes);
    });
    Payload held = payloads.next(64);  // a queued send, say, still holds it
    const Payload second = payloads.next(64);
    CHECK(made == 2);
    CHECK(second.data() != held.data());
    const std::uint8_t* first_bytes = held.data();
    held = Payload();  // the send completed
    const std::uint8_t* refilled = payloads.next(64).data();  // free again: reused, not made
    CHECK(made == 2);
    CHECK(refilled == first_bytes);
    const Payload keep_a = payloads.next(64), keep_b = payloads.next(64);  // both held now
    CHECK(made == 3);
    (void)keep_a;
    (void)keep_b;
    payloads.next(128);  // another size: a new buffer
    CHECK(made == 4);
}
