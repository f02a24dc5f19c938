// The framing module both ends use (src/protocol/framing.hpp): a ChunkSender cuts a vector into
// chunks (float32 slices without a copy, or encoded), and a ChunkAssembler checks each chunk as it
// arrives, refuses what does not fit the agreed layout with a countable reason (dropping the
// partial vector whole), adopts a one-chunk float32 vector as it came and reassembles or decodes
// longer ones into buffers it recycles only once nobody holds them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fake_center.hpp"
#include "protocol/framing.hpp"
#include "worker/server_session.hpp"

namespace {

using namespace tether;
using Vec = std::vector<float>;
using Result = ChunkAssembler::Result;

struct Chunk {
    Header header;
    Payload payload;
};

Payload payload_of(const Vec& x) {
    Payload p = Payload::allocate(x.size() * sizeof(float));
    std::memcpy(p.data(), x.data(), p.size());
    return p;
}

// Every chunk `sender` makes of x.
std::vector<Chunk> chunks_of(ChunkSender& sender, const Payload& x) {
    std::vector<Chunk> out;
    Header h;
    h.type = MessageType::exchange;
    sender.send(h, x, [&](const Header& chunk_header, const Payload& chunk) { out.push_back({chunk_header, chunk}); });
    return out;
}

Vec floats_of(const Payload& p) { return Vec(p.floats(), p.floats() + p.size() / sizeof(float)); }

// An assembler of float32 exchanges that refuses NaN/Inf, as the center's.
ChunkAssembler center_side(std::size_t n, std::size_t chunk) {
    return ChunkAssembler(ChunkFormat{n, chunk}, "exchange", "cluster.codec", /*refuse_non_finite=*/true);
}

}  // namespace

TEST_CASE("a vector is cut into chunks of chunk_elements, the last one shorter and flagged; float32 chunks are not copied") {
    CHECK(chunk_count(5, 2) == 3);
    CHECK(chunk_count(4, 2) == 2);
    CHECK(chunk_count(0, 2) == 1);  // an empty vector is still one message
    CHECK(chunk_range(5, 2, 2).first == 4);
    CHECK(chunk_range(5, 2, 2).count == 1);
    ChunkSender sender(ChunkFormat{5, 2});
    const Payload x = payload_of({1, 2, 3, 4, 5});
    const std::vector<Chunk> chunks = chunks_of(sender, x);
    REQUIRE(chunks.size() == 3);
    for (std::uint32_t k = 0; k < 3; ++k) {
        CAPTURE(k);
        const Header& h = chunks[k].header;
        CHECK(h.type == MessageType::exchange);
        CHECK(h.dtype == Dtype::float32);
        CHECK(h.chunk_index == k);
        CHECK(h.chunk_count == 3);
        CHECK(h.element_count == (k < 2 ? 2u : 1u));
        CHECK(h.flags == (k == 2 ? kFlagLastChunk : 0u));
        CHECK(chunks[k].payload.data() == x.data() + k * 2 * sizeof(float));  // a slice of x itself
    }
    CHECK(dtype_of(CodecKind::int8) == Dtype::int8);
    CHECK(max_payload_bytes({CodecKind::bf16}, 1000) == 4000);                // float32 is larger
    CHECK(max_payload_bytes({CodecKind::topk, 1.0}, 1000) == 8 + 8 * 1000);  // top-k of everything
}

TEST_CASE("a one-chunk float32 vector is adopted as it came, without a copy") {
    ChunkAssembler in = center_side(3, 4);
    ChunkSender out(ChunkFormat{3, 4});
    const Payload x = payload_of({1, 2, 3});
    const std::vector<Chunk> chunks = chunks_of(out, x);
    REQUIRE(chunks.size() == 1);
    REQUIRE(in.add(chunks[0].header, chunks[0].payload) == Result::complete);
    const Payload vector = in.take();
    CHECK(vector.data() == x.data());
}

TEST_CASE("chunks are reassembled into one buffer, recycled only once nobody holds it") {
    ChunkAssembler in = center_side(5, 2);
    ChunkSender out(ChunkFormat{5, 2});
    const Payload x = payload_of({1, 2, 3, 4, 5});
    const std::vector<Chunk> chunks = chunks_of(out, x);
    CHECK(in.add(chunks[0].header, chunks[0].payload) == Result::partial);
    CHECK(in.chunks_received() == 1);
    CHECK(in.add(chunks[1].header, chunks[1].payload) == Result::partial);
    CHECK(in.add(chunks[2].header, chunks[2].payload) == Result::complete);
    const Payload first = in.take();
    CHECK(floats_of(first) == Vec{1, 2, 3, 4, 5});
    CHECK(first.data() != x.data());
    // `first` still held (a reply queued in ZeroMQ): the next vector goes elsewhere, and `first`
    // keeps its values.
    const Payload y = payload_of({6, 7, 8, 9, 10});
    for (const Chunk& c : chunks_of(out, y)) in.add(c.header, c.payload);
    const Payload second = in.take();
    CHECK(second.data() != first.data());
    CHECK(floats_of(first) == Vec{1, 2, 3, 4, 5});
    CHECK(floats_of(second) == Vec{6, 7, 8, 9, 10});
}

TEST_CASE("a chunk that does not fit the layout is refused by reason, and the partial vector goes whole") {
    const std::size_t n = 5, e = 2;
    ChunkSender out(ChunkFormat{n, e});
    const Payload x = payload_of({1, 2, 3, 4, 5});
    const std::vector<Chunk> good = chunks_of(out, x);
    // Each fault applied to chunk 1, after chunk 0 was accepted.
    struct Fault {
        std::string reason;
        Header header;
        Payload payload;
    };
    std::vector<Fault> faults;
    auto fault = [&](const std::string& reason) -> Fault& {
        faults.push_back({reason, good[1].header, good[1].payload});
        return faults.back();
    };
    fault("wrong dtype").header.dtype = Dtype::bf16;
    fault("wrong chunk count").header.chunk_count = 2;
    fault("chunk out of order").header.chunk_index = 2;
    fault("wrong count").header.element_count = 1;
    fault("wrong encoding").header.flags |= kFlagChangeFromCopy;
    fault("wrong size").payload = good[1].payload.slice(0, 4);
    fault("non-finite payload").payload = payload_of({1, std::numeric_limits<float>::infinity()});
    for (const Fault& f : faults) {
        CAPTURE(f.reason);
        ChunkAssembler in = center_side(n, e);
        REQUIRE(in.add(good[0].header, good[0].payload) == Result::partial);
        REQUIRE(in.add(f.header, f.payload) == Result::refused);
        CHECK(std::string(tether::to_string(in.refusal().code)) == f.reason);
        CHECK_FALSE(in.refusal().detail.empty());
        CHECK(in.chunks_received() == 0);
        // The partial vector is gone: its next chunk is out of order, and a whole vector then fits.
        REQUIRE(in.add(good[1].header, good[1].payload) == Result::refused);
        CHECK(in.refusal().code == tether::ErrorCode::chunk_out_of_order);
        CHECK(in.refusal().detail == "expected chunk 0, got 1");
        for (std::size_t k = 0; k < good.size(); ++k)
            CHECK(in.add(good[k].header, good[k].payload) == (k + 1 < good.size() ? Result::partial : Result::complete));
        CHECK(floats_of(in.take()) == Vec{1, 2, 3, 4, 5});
    }
    SUBCASE("the refusal texts name the expected and the given value") {
        ChunkAssembler in = center_side(n, e);
        Header h = good[0].header;
        h.dtype = Dtype::utf8;
        REQUIRE(in.add(h, good[0].payload) == Result::refused);
        CHECK(in.refusal().detail == "exchange payloads of this run are float32 (cluster.codec), got utf8");
        REQUIRE(in.add(good[0].header, good[1].payload.slice(0, 4)) == Result::refused);
        CHECK(in.refusal().detail == "payload of 4 bytes for 2 float32 elements");
    }
}

TEST_CASE("drop() forgets a partial vector (its sender was refused for another reason)") {
    ChunkAssembler in = center_side(5, 2);
    ChunkSender out(ChunkFormat{5, 2});
    const std::vector<Chunk> chunks = chunks_of(out, payload_of({1, 2, 3, 4, 5}));
    REQUIRE(in.add(chunks[0].header, chunks[0].payload) == Result::partial);
    in.drop();
    CHECK(in.add(chunks[1].header, chunks[1].payload) == Result::refused);
    CHECK(in.refusal().code == tether::ErrorCode::chunk_out_of_order);
}

TEST_CASE("a receiver that trusts its peer with NaN takes it; float32 only is checked for it") {
    ChunkAssembler in(ChunkFormat{2, 4}, "reply", "cluster.reply_codec", /*refuse_non_finite=*/false);
    Header h;
    h.dtype = Dtype::float32;
    h.element_count = 2;
    const Payload nan = payload_of({std::numeric_limits<float>::quiet_NaN(), 1});
    REQUIRE(in.add(h, nan) == Result::complete);
    CHECK(std::isnan(in.take().floats()[0]));
}

TEST_CASE("a lossy state travels as its change from the receiver's copy, decoded chunk by chunk, committed at the last") {
    const std::size_t n = 5, e = 2;
    const ChunkFormat format{n, e, {CodecKind::bf16}, WireVector::state};
    ChunkSender out(format);
    ChunkAssembler in(format, "reply", "cluster.reply_codec", /*refuse_non_finite=*/false);
    const Vec start{1, 1, 1, 1, 1};
    out.reset(start.data());
    in.reset(start.data());
    const Vec x{1.5f, 2, 3, -4, 5.25f};  // exactly representable changes
    const std::vector<Chunk> chunks = chunks_of(out, payload_of(x));
    REQUIRE(chunks.size() == 3);
    for (const Chunk& c : chunks) {
        CHECK(c.header.dtype == Dtype::bf16);
        CHECK((c.header.flags & kFlagChangeFromCopy) != 0);
        CHECK(c.payload.size() == c.header.element_count * 2);
    }
    SUBCASE("every chunk decodes, and both copies move to x") {
        CHECK(in.add(chunks[0].header, chunks[0].payload) == Result::partial);
        CHECK(in.add(chunks[1].header, chunks[1].payload) == Result::partial);
        CHECK(in.add(chunks[2].header, chunks[2].payload) == Result::complete);
        CHECK(floats_of(in.take()) == x);
        // The next vector equal to x is a change of zero from both copies.
        const std::vector<Chunk> again = chunks_of(out, payload_of(x));
        for (const Chunk& c : again) in.add(c.header, c.payload);
        CHECK(floats_of(in.take()) == x);
    }
    SUBCASE("a chunk that does not decode is refused as bad encoding, and nothing is committed") {
        CHECK(in.add(chunks[0].header, chunks[0].payload) == Result::partial);
        REQUIRE(in.add(chunks[1].header, chunks[1].payload.slice(0, 3)) == Result::refused);
        CHECK(in.refusal().code == tether::ErrorCode::bad_encoding);
        CHECK(in.refusal().detail.find("bf16: 3 bytes") == 0);
        // The copy is still the start: the same chunks, sent again in full, rebuild x.
        for (const Chunk& c : chunks) in.add(c.header, c.payload);
        CHECK(floats_of(in.take()) == x);
    }
    SUBCASE("a value where a change is expected is refused as wrong encoding") {
        Header h = chunks[0].header;
        h.flags &= ~kFlagChangeFromCopy;
        REQUIRE(in.add(h, chunks[0].payload) == Result::refused);
        CHECK(in.refusal().code == tether::ErrorCode::wrong_encoding);
        CHECK(in.refusal().detail == "this run's reply payloads are changes from the receiver's copy (flag bit 1)");
    }
}

// The worker's end: a ServerSession receives welcomes and replies through the same assembler,
// so it takes a reply cut into chunks whole, and stops on a chunk that breaks the layout.
TEST_CASE("a worker reassembles a reply sent in chunks, and refuses one whose chunks do not fit") {
    using tether::testing::FakeCenter;
    using tether::testing::kFingerprint;
    for (const std::string fault : {"none", "out of order", "wrong count", "wrong chunk count"}) {
        CAPTURE(fault);
        FakeCenter center;
        SessionOptions options;
        options.fingerprint = kFingerprint;
        options.chunk_elements = 2;  // 3 parameters: chunks of 2 and 1
        options.join_timeout_ms = options.reply_timeout_ms = 5000;
        options.server_address = "the-server";
        ServerSession session(center.transport->connect(center.endpoint->address(), "w", {}), options, 3);
        auto joined = std::async(std::launch::async, [&] { return session.join(); });
        const auto hello = center.receive();
        ChunkSender sender(ChunkFormat{3, 2});
        Header h;
        h.type = MessageType::welcome;
        h.fingerprint = kFingerprint;
        sender.send(h, payload_of({1, 2, 3}), [&](const Header& chunk_header, const Payload& chunk) {
            center.endpoint->send(hello.peer, encode(chunk_header), chunk);
        });
        CHECK(joined.get().center == Vec{1, 2, 3});
        auto exchanged = std::async(std::launch::async, [&] { return session.exchange(payload_of({4, 5, 6}), {1, 1}); });
        const auto first = center.receive(), second = center.receive();  // the exchange's two chunks
        CHECK(first.header.chunk_index == 0);
        CHECK(second.header.chunk_index == 1);
        CHECK((second.header.flags & kFlagLastChunk) != 0);
        h.type = MessageType::reply;
        h.sequence = first.header.sequence;
        std::vector<Chunk> reply = chunks_of(sender, payload_of({7, 8, 9}));
        Header& last = reply[1].header;
        last.type = MessageType::reply;
        last.sequence = first.header.sequence;
        last.fingerprint = kFingerprint;
        reply[0].header = last;
        reply[0].header.chunk_index = 0;
        reply[0].header.element_count = 2;
        if (fault == "out of order") std::swap(reply[0], reply[1]);
        if (fault == "wrong count") reply[0].header.element_count = 1;
        if (fault == "wrong chunk count") reply[0].header.chunk_count = 1;
        for (const Chunk& c : reply) center.endpoint->send(first.peer, encode(c.header), c.payload);
        if (fault == "none") {
            CHECK(floats_of(exchanged.get().reply) == Vec{7, 8, 9});
            continue;
        }
        const std::string reason = fault == "out of order" ? "chunk out of order" : fault;
        CHECK_THROWS_WITH_AS(exchanged.get(),
                             doctest::Contains(("inconsistent reply chunk from the server: " + reason + ": ").c_str()),
                             std::runtime_error);
    }
}
