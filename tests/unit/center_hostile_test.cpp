// A center facing hostile or broken peers: floods of malformed messages leave x~ untouched, a
// peer that never reads cannot stall it, a message of many frames is refused by its total size,
// the number of peers is capped and their state freed, implausible sample counts are not
// believed, and a peer that joined but sends only heartbeats does not hold synchronous rounds.
#include <doctest/doctest.h>

#include <zmq.hpp>

#include <chrono>
#include <random>

#include "center_harness.hpp"

using namespace tether::testing;
using Clock = std::chrono::steady_clock;

namespace {

// One malformed message of kind `i % 6`, from random bytes to well-formed headers that lie.
std::pair<std::vector<std::uint8_t>, Vec> malformed(std::mt19937& random, int i) {
    std::uniform_int_distribution<int> byte(0, 255);
    Header h = exchange_header(1 + i);
    switch (i % 6) {
        case 0: {  // random bytes of a random length
            std::vector<std::uint8_t> junk(std::size_t(random() % 100));
            for (auto& b : junk) b = std::uint8_t(byte(random));
            return {junk, {}};
        }
        case 1: {  // a valid header with one byte flipped
            auto bytes = tether::encode(h);
            bytes[random() % bytes.size()] ^= std::uint8_t(1 + random() % 255);
            return {bytes, {1.f, 2.f, 3.f}};
        }
        case 2: return {tether::encode(h), {NAN, 0.f, 1.f}};                         // non-finite payload
        case 3: return {tether::encode(h), {1.f, 2.f}};                              // wrong size
        case 4: h.fingerprint ^= 1; return {tether::encode(h), {1.f, 2.f, 3.f}};     // wrong fingerprint
        default: h.samples = std::uint64_t(1) << 60; h.element_count = 7; return {tether::encode(h), {1.f, 2.f, 3.f}};
    }
}

}  // namespace

TEST_CASE("10,000 malformed messages during a run leave x~ untouched; the run goes on") {
    ServedCenter served(kAeasgd, options_for(1), unique_inproc(), 0);
    auto worker = served.connect("worker-a");
    join(*worker, 0, kInitial);
    auto hostile = served.connect("hostile");
    std::mt19937 random(7);
    constexpr int kMessages = 12000, kBatch = 500;
    int errors = 0;
    // In batches, the answers read in between (the center's queue to one peer holds 1,000, and
    // it drops rather than waits). A peer the center does not know gets one "unknown worker"
    // answer per 500 ms, not one per message; the counters below say every message arrived.
    for (int i = 0; i < kMessages; i += kBatch) {
        for (int k = i; k < i + kBatch; ++k) {
            const auto [bytes, payload] = malformed(random, k);
            send_raw(*hostile, bytes, payload);
        }
        Frames frames;
        while (hostile->receive(frames, 300)) ++errors;
    }
    CHECK(errors > 0);
    CHECK(errors <= kMessages);
    // The real worker's exchange is answered as if nothing had happened: x~ was untouched.
    send(*worker, exchange_header(1), {2.f, 0.f, 5.f});
    Frames frames;
    receive(*worker, MessageType::reply, frames, 20000);
    check_equal(floats_of(frames), {0.25f, 0.25f, 1.125f});
    send(*worker, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(10000));
    check_equal(served.center().state().x, {1.25f, -0.75f, 1.625f});
    CHECK(served.center().state().version == 1);
    CHECK(served.center().stats().rejected_total() >= std::uint64_t(kMessages));
    CHECK(served.center().stats().total_samples == 0);
}

TEST_CASE("a peer that never reads cannot stall the center: its replies are dropped and counted") {
    ServedCenter served(kAeasgd, options_for(1), "tcp://127.0.0.1:*", 0);
    auto worker = served.connect("worker-a");
    join(*worker, 0, kInitial);
    // A raw DEALER with a tiny receive queue that never reads: every rejection it provokes
    // would block a center that waits on sends.
    zmq::context_t context;
    zmq::socket_t silent(context, zmq::socket_type::dealer);
    silent.set(zmq::sockopt::rcvhwm, 1);
    silent.set(zmq::sockopt::sndhwm, 0);
    silent.set(zmq::sockopt::linger, 0);
    silent.connect(served.address());
    const auto started = Clock::now();
    constexpr int kJunk = 200000;
    for (int i = 0; i < kJunk; ++i) silent.send(zmq::str_buffer("junk"), zmq::send_flags::none);
    // While the center rejects the junk, the worker's heartbeats are answered promptly.
    double slowest = 0;
    int answers = 0;
    while (Clock::now() - started < std::chrono::seconds(4)) {
        const auto sent = Clock::now();
        send(*worker, header(MessageType::heartbeat), {});
        Frames frames;
        receive(*worker, MessageType::heartbeat, frames, 10000);
        slowest = std::max(slowest, std::chrono::duration<double>(Clock::now() - sent).count());
        ++answers;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    MESSAGE(answers << " heartbeats answered, slowest after " << slowest << " s, behind " << kJunk << " junk messages");
    CHECK(slowest < 1.0);
    send(*worker, exchange_header(1), {2.f, 0.f, 5.f});
    Frames frames;
    receive(*worker, MessageType::reply, frames, 10000);
    send(*worker, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(10000));
    const auto& stats = served.center().stats();
    CHECK(stats.updates_applied == 1);
    CHECK(stats.replies_dropped > 0);
    MESSAGE("rejected " << stats.rejected_total() << ", replies dropped " << stats.replies_dropped);
}

TEST_CASE("a message of many frames is refused by its total size, and its frames are freed") {
    CenterOptions options = options_for(1);
    options.max_message_bytes = 1 << 20;
    ServedCenter served(kAeasgd, options, "tcp://127.0.0.1:*", 0);
    zmq::context_t context;
    zmq::socket_t peer(context, zmq::socket_type::dealer);
    peer.set(zmq::sockopt::linger, 0);
    peer.connect(served.address());
    std::vector<char> frame(256 * 1024, 'x');  // 16 frames of 256 KiB: 4 MiB in one message
    for (int i = 0; i < 16; ++i) peer.send(zmq::buffer(frame), i + 1 < 16 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    zmq::message_t header, reason;
    REQUIRE(peer.recv(header));
    REQUIRE(header.more());
    REQUIRE(peer.recv(reason));
    CHECK(starts_with(reason.to_string(), "message too large"));
    served.finish();
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::message_too_large) == 1);
}

TEST_CASE("peers are capped, and a bye frees the place") {
    CenterOptions options = options_for(2);
    options.membership.max_peers = 2;
    options.membership.elastic = true;
    ServedCenter served(kAeasgd, options);
    auto a = served.connect("a"), b = served.connect("b"), c = served.connect("c");
    send(*a, header(MessageType::hello, 3), {});
    send(*b, header(MessageType::hello, 3), {});
    Frames frames;
    // Two sockets: the hellos may arrive in either order, and the ids with them.
    const std::uint32_t a_id = receive(*a, MessageType::welcome, frames).worker_id;
    receive(*b, MessageType::welcome, frames);
    CHECK(starts_with(rejection(*c, tether::encode(header(MessageType::hello, 3))), "too many peers"));
    send(*a, header(MessageType::bye), {});
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a's pipe and c's are queued apart
    // a's place is free: c joins (elastic), and takes the worker id a held.
    send(*c, header(MessageType::hello, 3), {});
    const Header welcome = receive(*c, MessageType::welcome, frames);
    CHECK(welcome.worker_id == a_id);
    served.finish();
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::too_many_peers) == 1);
}

TEST_CASE("a heartbeat claiming 2^60 samples is not believed; the center answers heartbeats") {
    CenterOptions options = options_for(1);
    options.membership.max_samples_per_worker = 1000;
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker-a");
    join(*worker, 0, kInitial);
    Header h = header(MessageType::heartbeat);
    h.samples = std::uint64_t(1) << 60;
    send(*worker, h, {});
    Frames frames;
    receive(*worker, MessageType::heartbeat, frames);  // the answer: the center is alive
    h.samples = 640;
    send(*worker, h, {});
    receive(*worker, MessageType::heartbeat, frames);
    served.finish();
    CHECK(served.center().stats().total_samples == 640);
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::implausible_samples) == 1);
}

TEST_CASE("a synchronous round does not wait on a peer that joined but sends only heartbeats") {
    CenterOptions options = options_for(2);
    options.membership.worker_timeout_ms = 400;
    options.rounds.round_timeout_ms = 60000;  // the deadline would not save the round
    ServedCenter served({{"name", "averaging"}}, options);
    auto real = served.connect("real"), idle = served.connect("idle");
    send(*real, header(MessageType::hello, 3), {});
    send(*idle, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*real, MessageType::welcome, frames);
    receive(*idle, MessageType::welcome, frames);
    const auto sent = Clock::now();
    send(*real, exchange_header(1), {3.f, 3.f, 3.f});
    // The idle peer keeps heartbeating; the round must still close, on the live worker.
    bool replied = false;
    while (!replied && Clock::now() - sent < std::chrono::seconds(5)) {
        send(*idle, header(MessageType::heartbeat), {});
        replied = real->receive(frames, 100);
    }
    REQUIRE(replied);
    const double seconds = std::chrono::duration<double>(Clock::now() - sent).count();
    MESSAGE("round closed after " << seconds << " s");
    CHECK(seconds < 2.0);
    served.finish();
    CHECK(served.center().stats().workers_silent == 1);  // lost, and it never exchanged
    CHECK(served.center().stats().rounds == 1);
}

TEST_CASE("a worker that says bye while its synchronous round is open is answered nothing, and the run goes on") {
    ServedCenter served({{"name", "averaging"}}, options_for(2));
    auto leaving = served.connect("leaving"), staying = served.connect("staying");
    send(*leaving, header(MessageType::hello, 3), {});
    send(*staying, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*leaving, MessageType::welcome, frames);
    receive(*staying, MessageType::welcome, frames);
    send(*leaving, exchange_header(1), {3.f, 3.f, 3.f});
    send(*leaving, header(MessageType::bye), {});
    // Its x_i closes the round (the one live worker left has not reported); the reply goes to
    // nobody: the worker that left reads no more, and its reply's encoder is gone.
    CHECK_FALSE(leaving->receive(frames, 300));
    send(*staying, exchange_header(1), {1.f, 1.f, 1.f});
    receive(*staying, MessageType::reply, frames);
    served.finish();
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().rounds == 2);
    CHECK(served.center().stats().workers_finished == 1);
    check_equal(served.center().state().x, {1.f, 1.f, 1.f});
}
