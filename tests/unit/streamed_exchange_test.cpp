// A center streams exchanges (UpdateOptions::stream_exchanges, the default): each float32 chunk
// is checked and applied, or added into the round, as it arrives, and an asynchronous rule's
// reply to it leaves at once in the same frame, so that no worker's vector is held whole
// (a center that assembles each keeps about one model copy per worker). What a user relies on: the same
// x~ as an assembled exchange, replies that start before the exchange ends, a chunk refused
// half-way that leaves x~ finite and the next exchange free to start, and a synchronous round
// whose ranges are each the mean of the exchanges that hold them.
#include <doctest/doctest.h>

#include <limits>
#include <utility>

#include "center_harness.hpp"
#include "protocol/framing.hpp"

using namespace tether::testing;

namespace {

// Chunk `index` of 2 of exchange `sequence` (3 elements, 2 to a chunk).
std::vector<std::uint8_t> chunk(std::uint32_t index, std::uint64_t sequence) {
    Header h = exchange_header(sequence, index == 0 ? 2 : 1);
    h.chunk_index = index;
    h.chunk_count = 2;
    h.flags = index == 1 ? tether::kFlagLastChunk : 0;
    return tether::encode(h);
}

CenterOptions streaming_options(int workers) {
    CenterOptions options = options_for(workers);
    options.updates.chunk_elements = 2;  // x~ = {1, -1, 0.5}: chunk 0 holds 2, chunk 1 holds 1
    REQUIRE(options.updates.stream_exchanges);  // the default
    return options;
}

// A worker that said hello and took its welcome (2 chunks).
std::unique_ptr<Channel> joined(ServedCenter& served) {
    auto worker = served.connect("worker-a");
    send(*worker, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*worker, MessageType::welcome, frames);
    receive(*worker, MessageType::welcome, frames);
    return worker;
}

// Two workers that said hello (a join barrier of 2) and took their welcomes.
std::pair<std::unique_ptr<Channel>, std::unique_ptr<Channel>> two_joined(ServedCenter& served) {
    auto a = served.connect("worker-a");
    auto b = served.connect("worker-b");
    send(*a, header(MessageType::hello, 3), {});
    send(*b, header(MessageType::hello, 3), {});
    Frames frames;
    for (Channel* w : {a.get(), b.get()}) {
        receive(*w, MessageType::welcome, frames);
        receive(*w, MessageType::welcome, frames);
    }
    return {std::move(a), std::move(b)};
}

}  // namespace

TEST_CASE("a streamed chunk is the received frame itself, with where it lands") {
    tether::ChunkAssembler in({3, 2, {}, tether::WireVector::state}, "exchange", "cluster.codec", true, /*streams=*/true);
    Header h = exchange_header(1, 2);
    h.chunk_count = 2;
    h.flags = 0;
    tether::Payload first = tether::Payload::allocate(2 * sizeof(float));
    first.floats()[0] = 2.f;
    first.floats()[1] = 0.f;
    REQUIRE(in.add(h, first) == tether::ChunkAssembler::Result::piece);
    CHECK(in.piece().payload.data() == first.data());  // not copied
    CHECK(in.piece().first == 0);
    CHECK(in.piece().count == 2);
    CHECK_FALSE(in.piece().last);
    h.chunk_index = 1;
    h.element_count = 1;
    h.flags = tether::kFlagLastChunk;
    tether::Payload second = tether::Payload::allocate(sizeof(float));
    second.floats()[0] = 5.f;
    REQUIRE(in.add(h, second) == tether::ChunkAssembler::Result::piece);
    CHECK(in.piece().first == 2);
    CHECK(in.piece().last);
    CHECK(in.chunks_received() == 0);  // the next vector starts at chunk 0
}

TEST_CASE("an asynchronous rule answers each chunk as it lands, and x~ ends as with a whole exchange") {
    ServedCenter served(kAeasgd, streaming_options(1));  // elastic = 0.25 (x_i - x~)
    auto worker = joined(served);
    Frames frames;

    send_raw(*worker, chunk(0, 1), {2.f, 0.f});
    // Answered before chunk 1 is even sent: x~ = {1.25, -0.75, 0.5} so far, version 0.
    const Header r0 = receive(*worker, MessageType::reply, frames);
    CHECK(r0.chunk_index == 0);
    CHECK(r0.chunk_count == 2);
    CHECK(r0.sequence == 1);
    CHECK((r0.flags & tether::kFlagLastChunk) == 0);
    CHECK(r0.center_version == 0);
    check_equal(floats_of(frames), {0.25f, 0.25f});

    send_raw(*worker, chunk(1, 1), {5.f});
    const Header r1 = receive(*worker, MessageType::reply, frames);
    CHECK(r1.chunk_index == 1);
    CHECK((r1.flags & tether::kFlagLastChunk) != 0);
    CHECK(r1.center_version == 1);  // the exchange's last range moves the version
    check_equal(floats_of(frames), {1.125f});

    served.finish();
    REQUIRE_FALSE(served.failure());
    check_equal(served.center().state().x, {1.25f, -0.75f, 1.625f});  // as an assembled exchange leaves it
    CHECK(served.center().state().version == 1);
    CHECK(served.center().stats().exchanges == 1);
    CHECK(served.center().stats().updates_applied == 1);
}

TEST_CASE("a chunk refused half-way leaves the ranges before it applied, x~ finite, and the next exchange free") {
    ServedCenter served(kAeasgd, streaming_options(1));
    auto worker = joined(served);
    Frames frames;

    send_raw(*worker, chunk(0, 1), {2.f, 0.f});
    receive(*worker, MessageType::reply, frames);
    CHECK(starts_with(rejection(*worker, chunk(1, 1), {std::numeric_limits<float>::quiet_NaN()}), "non-finite payload"));
    // The refused exchange is over: its chunk 1 again is out of order, and a new one starts at 0.
    CHECK(starts_with(rejection(*worker, chunk(1, 1), {5.f}), "chunk out of order"));
    send_raw(*worker, chunk(0, 2), {1.25f, -0.75f});  // equal to x~ there: no move
    check_equal(floats_of((receive(*worker, MessageType::reply, frames), frames)), {0.f, 0.f});
    send_raw(*worker, chunk(1, 2), {0.5f});
    const Header last = receive(*worker, MessageType::reply, frames);
    CHECK(last.center_version == 1);  // only the complete exchange counts as an update
    check_equal(floats_of(frames), {0.f});

    served.finish();
    REQUIRE_FALSE(served.failure());
    check_equal(served.center().state().x, {1.25f, -0.75f, 0.5f});  // chunk 0 of exchange 1 stayed; no NaN
    CHECK(served.center().stats().exchanges == 1);
    CHECK(served.center().stats().updates_applied == 1);
    CHECK(served.center().stats().rejected_total() == 2);
}

TEST_CASE("a synchronous round streamed range by range: each range is the mean of the exchanges that hold it") {
    ServedCenter served({{"name", "averaging"}}, streaming_options(2));
    auto [a, b] = two_joined(served);
    Frames frames;
    Header bye = header(MessageType::bye);
    // b: its chunk 0 lands in the round, then it leaves half-way.
    send_raw(*b, [] {
        Header h = exchange_header(1, 2);
        h.chunk_count = 2;
        h.flags = 0;
        return tether::encode(h);
    }(), {5.f, 5.f});
    // a: its whole x_i; the round waits for b until b says bye.
    send_raw(*a, chunk(0, 1), {3.f, 3.f});
    send_raw(*a, chunk(1, 1), {3.f});
    send(*b, bye, {});
    const Header r0 = receive(*a, MessageType::reply, frames);
    CHECK(r0.chunk_index == 0);
    check_equal(floats_of(frames), {4.f, 4.f});  // (3 + 5) / 2: both held chunk 0
    receive(*a, MessageType::reply, frames);
    check_equal(floats_of(frames), {3.f});  // only a held chunk 1

    served.finish();
    REQUIRE_FALSE(served.failure());
    check_equal(served.center().state().x, {4.f, 4.f, 3.f});
    CHECK(served.center().stats().rounds == 1);
}

TEST_CASE("a worker whose exchange another one overtook pulls the version it began at, plus its own") {
    ServedCenter served(kAeasgd, streaming_options(2));
    auto [a, b] = two_joined(served);
    Frames frames;
    send_raw(*a, chunk(0, 1), {2.f, 0.f});
    receive(*a, MessageType::reply, frames);
    // b's whole exchange lands between a's two chunks: version 1, which a's chunk 0 lacks.
    send_raw(*b, chunk(0, 1), {2.f, 0.f});
    receive(*b, MessageType::reply, frames);
    send_raw(*b, chunk(1, 1), {5.f});
    CHECK(receive(*b, MessageType::reply, frames).center_version == 1);
    send_raw(*a, chunk(1, 1), {5.f});
    // x~ is at version 2, but a's reply holds b's update on chunk 1 only: a pulled at 0 + 1.
    CHECK(receive(*a, MessageType::reply, frames).center_version == 1);
    served.finish();
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().state().version == 2);
}
