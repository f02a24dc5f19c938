// The Center refuses what it must: every malformed message, before or after the worker joined,
// gets an `error` reply whose text starts with the reason, is counted in stats().rejected by
// that reason, and leaves x~ exactly as it was; a partial exchange is dropped whole.
#include <doctest/doctest.h>

#include <zmq.hpp>  // only for the extra-frame case: a Channel always sends exactly two frames

#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "center_harness.hpp"

using namespace tether::testing;  // the harness, and the protocol names it re-exports

TEST_CASE("every malformed message is answered with an error, counted by reason, and leaves x~ untouched") {
    ServedCenter served(kAeasgd, options_for(1));
    auto worker = served.connect("raw-worker");
    std::map<std::string, std::uint64_t> expected;
    auto check_rejected = [&](const std::string& reason, const std::vector<std::uint8_t>& header_bytes,
                              const Vec& payload = {}) {
        CAPTURE(reason);
        const std::string text = rejection(*worker, header_bytes, payload);
        CHECK_MESSAGE(starts_with(text, reason + ": "), text);
        ++expected[reason];
    };
    const Vec x_i{2.f, 0.f, 5.f};

    // Before the worker has joined: the header itself is bad.
    const auto good_hello = tether::encode(header(MessageType::hello, 3));
    check_rejected("short header", std::vector<std::uint8_t>(good_hello.begin(), good_hello.begin() + 10));
    check_rejected("short header", {});
    {
        auto bytes = good_hello;
        bytes.push_back(0);
        check_rejected("long header", bytes);
    }
    {
        auto bytes = good_hello;
        bytes[0] ^= 0xFF;
        check_rejected("bad magic", bytes);
    }
    {
        auto bytes = good_hello;
        bytes[4] = std::uint8_t(tether::kProtocolVersion + 1);
        check_rejected("protocol version", bytes);
    }
    {
        auto bytes = good_hello;
        bytes[6] = 42;
        check_rejected("unknown type", bytes);
    }
    {
        auto bytes = good_hello;
        bytes[7] = 9;
        check_rejected("unknown dtype", bytes);
    }
    {
        Header h = header(MessageType::hello, 3);
        h.chunk_index = 1;
        check_rejected("bad chunk", tether::encode(h));
        h.chunk_index = 0;
        h.chunk_count = 0;
        check_rejected("bad chunk", tether::encode(h));
    }
    {
        auto bytes = good_hello;
        bytes[72] = 200;  // error_code: no code of this protocol version
        check_rejected("unknown error code", bytes);
    }
    {
        Header h = header(MessageType::hello, 3);
        h.fingerprint = kFingerprint ^ 0x100;  // another model or strategy
        check_rejected("wrong fingerprint", tether::encode(h));
    }
    check_rejected("wrong count", tether::encode(header(MessageType::hello, 4)));
    check_rejected("unknown worker", tether::encode(exchange_header(1)), x_i);

    join(*worker, 0, kInitial);

    // After joining: the exchange is bad.
    check_rejected("duplicate hello", good_hello);
    check_rejected("wrong count", tether::encode(exchange_header(1, 2)), x_i);
    check_rejected("wrong count", tether::encode(exchange_header(1, 4)), {2.f, 0.f, 5.f, 1.f});
    check_rejected("wrong size", tether::encode(exchange_header(1, 3)), {2.f, 0.f});
    check_rejected("wrong size", tether::encode(exchange_header(1, 3)), {2.f, 0.f, 5.f, 1.f});
    check_rejected("non-finite payload", tether::encode(exchange_header(1)),
                   {2.f, std::numeric_limits<float>::quiet_NaN(), 5.f});
    check_rejected("non-finite payload", tether::encode(exchange_header(1)),
                   {2.f, 0.f, -std::numeric_limits<float>::infinity()});
    {
        Header h = exchange_header(1);
        h.dtype = Dtype::utf8;
        check_rejected("wrong dtype", tether::encode(h), x_i);
    }
    {
        Header h = exchange_header(1);
        h.chunk_count = 2;
        check_rejected("wrong chunk count", tether::encode(h), x_i);
    }
    {
        Header h = exchange_header(1);
        h.fingerprint ^= 1;
        check_rejected("wrong fingerprint", tether::encode(h), x_i);
    }
    check_rejected("unexpected type", tether::encode(header(MessageType::welcome, 3, Dtype::float32)), x_i);
    check_rejected("unexpected type", tether::encode(header(MessageType::error, 0, Dtype::utf8)));
    // This center is not server 0 of a run that leases (MembershipOptions::leases off).
    check_rejected("unexpected type", tether::encode(header(MessageType::lease, 0, Dtype::utf8)));

    served.finish();
    REQUIRE_FALSE(served.failure());
    const auto& stats = served.center().stats();
    CHECK(stats.to_json()["rejected_by_reason"] == nlohmann::json(expected));
    CHECK(stats.rejected_total() == 26);
    CHECK(stats.to_json()["rejected_messages"] == 26);
    CHECK(stats.exchanges == 0);
    CHECK(stats.updates_applied == 0);
    CHECK(stats.workers_joined == 1);
    // x~ is bit for bit what it was.
    const Vec& x = served.center().state().x;
    REQUIRE(x.size() == kInitial.size());
    CHECK(std::memcmp(x.data(), kInitial.data(), x.size() * sizeof(float)) == 0);
    CHECK(served.center().state().version == 0);
}

TEST_CASE("a lease ask that is not one small chunk of {\"want\": n, \"total\": t} is refused, and no block is granted") {
    CenterOptions o = options_for(1);
    o.membership.leases = true;
    ServedCenter served(kAeasgd, o);
    auto worker = served.connect("raw-worker");
    join(*worker, 0, kInitial);
    const Vec not_json{1.f, 2.f, 3.f};  // 12 bytes that are no JSON
    CHECK(starts_with(rejection(*worker, tether::encode(header(MessageType::lease, 12, Dtype::utf8)), not_json), "malformed lease: "));
    CHECK(starts_with(rejection(*worker, tether::encode(header(MessageType::lease, 12, Dtype::none)), not_json), "malformed lease: "));
    CHECK(starts_with(rejection(*worker, tether::encode(header(MessageType::lease, 11, Dtype::utf8)), not_json), "malformed lease: "));
    served.finish();
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().to_json()["rejected_by_reason"] == nlohmann::json({{"malformed lease", 3}}));
    CHECK(served.center().stats().leases.granted == 0);
}

TEST_CASE("after rejections the worker is still served: a valid exchange then applies as usual") {
    ServedCenter served(kAeasgd, options_for(1));
    auto worker = served.connect("raw-worker");
    join(*worker, 0, kInitial);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(starts_with(rejection(*worker, tether::encode(exchange_header(1)), {nan, nan, nan}), "non-finite payload"));
    CHECK(starts_with(rejection(*worker, tether::encode(exchange_header(1, 2)), {1.f, 2.f, 3.f}), "wrong count"));
    CHECK(starts_with(rejection(*worker, tether::encode(exchange_header(1)), {1.f}), "wrong size"));
    send(*worker, exchange_header(7), {2.f, 0.f, 5.f});
    Frames frames;
    const Header reply = receive(*worker, MessageType::reply, frames);
    CHECK(reply.sequence == 7);
    CHECK(reply.center_version == 1);
    served.finish();
    REQUIRE_FALSE(served.failure());
    // Only the valid exchange moved x~: x~ + 0.25 (x_i - x~).
    check_equal(served.center().state().x, {1.25f, -0.75f, 1.625f});
    CHECK(served.center().state().version == 1);
    CHECK(served.center().stats().updates_applied == 1);
    CHECK(served.center().stats().rejected_total() == 3);
}

TEST_CASE("a message with an extra frame is rejected") {
    // A Channel always sends two frames, so a bare DEALER plays the worker here, over TCP on a
    // port the OS picks.
    ServedCenter served(kAeasgd, options_for(1), "tcp://127.0.0.1:*");
    const std::string address = served.address();
    REQUIRE(starts_with(address, "tcp://127.0.0.1:"));
    CHECK(address != "tcp://127.0.0.1:*");
    zmq::context_t context;
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 3000);
    dealer.set(zmq::sockopt::routing_id, "three-frames");
    dealer.connect(address);
    const auto hello = tether::encode(header(MessageType::hello, 3));
    const std::string extra = "surprise";
    REQUIRE(dealer.send(zmq::buffer(hello), zmq::send_flags::sndmore));
    REQUIRE(dealer.send(zmq::buffer(hello.data(), 0), zmq::send_flags::sndmore));
    REQUIRE(dealer.send(zmq::buffer(extra), zmq::send_flags::none));

    zmq::message_t head, body;
    REQUIRE(dealer.recv(head));
    REQUIRE(head.more());
    REQUIRE(dealer.recv(body));
    tether::ErrorCode reason = tether::ErrorCode::none;
    const auto h = tether::decode(head.data<std::uint8_t>(), head.size(), reason);
    REQUIRE(h.has_value());
    CHECK(h->type == MessageType::error);
    const std::string text(body.data<char>(), body.size());
    CHECK_MESSAGE(starts_with(text, "extra frames: "), text);
    dealer.close();

    served.finish();
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::extra_frames) == 1);
    CHECK(served.center().stats().workers_joined == 0);  // the hello inside it did not count
    CHECK(served.center().state().x == kInitial);
}

// These two are about an exchange assembled whole (UpdateOptions::stream_exchanges off);
// tests/unit/streamed_exchange_test.cpp has the streamed one, a center's default.
TEST_CASE("an exchange split into chunks is reassembled; a bad chunk drops the whole exchange") {
    CenterOptions options = options_for(1);
    options.updates.chunk_elements = 2;  // 3 elements: chunk 0 holds 2, chunk 1 holds 1
    options.updates.stream_exchanges = false;
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker-a");
    send(*worker, header(MessageType::hello, 3), {});
    Frames frames;
    Header w0 = receive(*worker, MessageType::welcome, frames);
    CHECK(w0.chunk_count == 2);
    CHECK(w0.chunk_index == 0);
    CHECK(floats_of(frames) == Vec{1.f, -1.f});
    Header w1 = receive(*worker, MessageType::welcome, frames);
    CHECK(w1.chunk_index == 1);
    CHECK((w1.flags & tether::kFlagLastChunk) != 0);
    CHECK(floats_of(frames) == Vec{0.5f});

    auto chunk = [](std::uint32_t id, std::uint64_t count, std::uint64_t sequence) {
        Header h = exchange_header(sequence, count);
        h.chunk_index = id;
        h.chunk_count = 2;
        h.flags = id == 1 ? tether::kFlagLastChunk : 0;
        return tether::encode(h);
    };
    // Chunk 0 fine, chunk 1 NaN: nothing lands on x~, and the next exchange starts at chunk 0.
    send_raw(*worker, chunk(0, 2, 1), {2.f, 0.f});
    CHECK(starts_with(rejection(*worker, chunk(1, 1, 1), {std::numeric_limits<float>::quiet_NaN()}),
                      "non-finite payload"));
    CHECK(starts_with(rejection(*worker, chunk(1, 1, 2), {5.f}), "chunk out of order"));
    CHECK(starts_with(rejection(*worker, chunk(0, 3, 2), {2.f, 0.f, 5.f}), "wrong count"));
    // Any rejection drops the partial exchange, even one that fails before the chunk checks.
    send_raw(*worker, chunk(0, 2, 2), {2.f, 0.f});
    {
        std::vector<std::uint8_t> bad_magic = chunk(1, 1, 2);
        bad_magic[0] ^= 0xFF;
        CHECK(starts_with(rejection(*worker, bad_magic, {5.f}), "bad magic"));
    }
    CHECK(starts_with(rejection(*worker, chunk(1, 1, 2), {5.f}), "chunk out of order"));
    send_raw(*worker, chunk(0, 2, 2), {2.f, 0.f});
    {
        Header other_model = exchange_header(2, 1);
        other_model.chunk_index = 1;
        other_model.chunk_count = 2;
        other_model.fingerprint ^= 1;
        CHECK(starts_with(rejection(*worker, tether::encode(other_model), {5.f}), "wrong fingerprint"));
    }
    CHECK(starts_with(rejection(*worker, chunk(1, 1, 2), {5.f}), "chunk out of order"));

    send_raw(*worker, chunk(0, 2, 3), {2.f, 0.f});
    send_raw(*worker, chunk(1, 1, 3), {5.f});
    const Header r0 = receive(*worker, MessageType::reply, frames);
    CHECK(r0.chunk_index == 0);
    CHECK(r0.sequence == 3);
    check_equal(floats_of(frames), {0.25f, 0.25f});
    const Header r1 = receive(*worker, MessageType::reply, frames);
    CHECK(r1.chunk_index == 1);
    check_equal(floats_of(frames), {1.125f});

    served.finish();
    REQUIRE_FALSE(served.failure());
    check_equal(served.center().state().x, {1.25f, -0.75f, 1.625f});
    CHECK(served.center().stats().exchanges == 1);
    CHECK(served.center().stats().rejected_total() == 7);
}

// Whichever check rejects a message (hello, type, chunk), the sender's partial exchange goes.
TEST_CASE("a rejection of any kind drops a partly received exchange") {
    CenterOptions options = options_for(1);
    options.updates.chunk_elements = 2;
    options.updates.stream_exchanges = false;
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker-a");
    send(*worker, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*worker, MessageType::welcome, frames);
    receive(*worker, MessageType::welcome, frames);
    auto chunk = [](std::uint32_t id, std::uint64_t count) {
        Header h = exchange_header(1, count);
        h.chunk_index = id;
        h.chunk_count = 2;
        return tether::encode(h);
    };
    const std::vector<std::vector<std::uint8_t>> interruptions{
        tether::encode(header(MessageType::hello, 3)),                    // duplicate hello
        tether::encode(header(MessageType::welcome, 3, Dtype::float32)),  // unexpected type
    };
    for (const auto& interruption : interruptions) {
        send_raw(*worker, chunk(0, 2), {2.f, 0.f});
        const std::string refused = rejection(*worker, interruption);
        CAPTURE(refused);
        send_raw(*worker, chunk(1, 1), {5.f});
        // The second chunk must not complete an exchange whose first chunk came before a rejection.
        REQUIRE(worker->receive(frames, 3000));
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto h = tether::decode(frames.header.data(), frames.header.size(), reason);
        REQUIRE(h.has_value());
        CHECK(h->type == MessageType::error);
        if (h->type == MessageType::reply) {
            REQUIRE(worker->receive(frames, 3000));  // the reply's second chunk
        } else {
            CHECK(starts_with(std::string(frames.payload.begin(), frames.payload.end()), "chunk out of order"));
        }
    }
    served.finish();
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().exchanges == 0);
    CHECK(served.center().state().x == kInitial);
}
