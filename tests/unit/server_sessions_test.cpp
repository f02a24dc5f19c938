// A worker of two servers (worker/server_sessions.hpp), against two hand-written servers: it
// joins server 0 first and asks server 1 for the id server 0 gave; each exchange sends each
// server its range (with that server's own version) before awaiting either reply; and when
// one server has forgotten the worker, it joins that one again and takes its x~ for that
// range only, its rule starting again from the result.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <future>
#include <vector>

#include "backend/backend.hpp"
#include "center/server_tokens.hpp"
#include "config/config.hpp"
#include "fake_center.hpp"
#include "worker/worker_node.hpp"

using namespace tether::testing;

namespace {

std::vector<float> floats_of(const Frames& frames) {
    std::vector<float> v(frames.payload.size() / sizeof(float));
    std::memcpy(v.data(), frames.payload.data(), frames.payload.size());
    return v;
}

// One link per fake center, server 0 first; server 1's fingerprint is `second_fingerprint`.
std::vector<tether::ServerLink> links_to(FakeCenter& zero, FakeCenter& one, std::uint64_t second_fingerprint,
                                         const std::string& first_address, const std::string& second_address) {
    std::vector<tether::ServerLink> links;
    links.push_back({zero.transport->connect(zero.endpoint->address(), "w", {}), kFingerprint, "{}", first_address, {}, false});
    links.push_back({one.transport->connect(one.endpoint->address(), "w", {}), second_fingerprint, "{}", second_address, {}, false});
    return links;
}

}  // namespace

TEST_CASE("two servers: ids agree, slices go out in parallel, versions are per server, a forgotten range rejoins alone") {
    FakeCenter zero, one;  // 5 parameters: server 0 owns [0, 3), server 1 [3, 5)
    auto backend = tether::make_backend({"cpu", 1, 0});  // outlives the node: the rule's buffers live in it
    tether::WorkerOptions options;
    options.join_timeout_ms = options.reply_timeout_ms = 5000;
    options.heartbeat_ms = 0;
    options.communication_window = 1;
    tether::WorkerNode node(links_to(zero, one, kFingerprint + 1, "zero", "one"), options, 5);

    auto joined = std::async(std::launch::async, [&] { return node.join(); });
    auto hello = zero.receive();
    CHECK(hello.header.element_count == 3);
    CHECK((hello.header.flags & tether::kFlagToken) == 0);  // server 0 takes no token
    zero.send(hello.peer, MessageType::welcome, 10, {1, 2, 3}, 0, kFingerprint, /*worker_id=*/4);
    const std::string token(tether::kServerTokenBytes, 'T');  // opaque to the worker
    zero.send_token(hello.peer, token, 4);
    hello = one.receive();
    CHECK(hello.header.element_count == 2);
    CHECK(hello.header.worker_id == 4);  // the id server 0 gave
    CHECK(hello.header.fingerprint == kFingerprint + 1);
    // ... shown with server 0's token, ahead of the agreed settings.
    CHECK((hello.header.flags & tether::kFlagToken) != 0);
    CHECK(std::string(hello.frames.payload.begin(), hello.frames.payload.end()) == token + "{}");
    one.send(hello.peer, MessageType::welcome, 20, {4, 5}, 0, kFingerprint + 1, 4);
    const tether::Welcome welcome = joined.get();
    CHECK(welcome.worker_id == 4);
    CHECK(welcome.center == std::vector<float>{1, 2, 3, 4, 5});

    // downpour: the payload is x - x_pull, the reply x~.
    const auto config = tether::parse_config({{"strategy", {{"name", "downpour"}, {"communication_window", 1}}}});
    std::vector<float> x(5);
    node.start(*backend, x.data(), config.cluster.strategy->make_worker_rule({1, 5}), welcome);
    REQUIRE(x == welcome.center);

    for (float& v : x) v += 1.f;
    auto stepped = std::async(std::launch::async, [&] { return node.after_step(1); });
    // Both slices arrive before either server answers.
    const auto to_zero = zero.receive(), to_one = one.receive();
    CHECK(floats_of(to_zero.frames) == std::vector<float>{1, 1, 1});
    CHECK(floats_of(to_one.frames) == std::vector<float>{1, 1});
    CHECK(to_zero.header.center_version == 10);  // each server's own version
    CHECK(to_one.header.center_version == 20);
    zero.send(to_zero.peer, MessageType::reply, 11, {10, 20, 30}, to_zero.header.sequence, kFingerprint, 4);
    // Server 1 has forgotten the worker: it joins that server again, with its id. The code
    // says so, whatever the text.
    one.send_error(to_one.peer, tether::ErrorCode::unknown_worker, "this server restarted and has never heard of you");
    hello = one.receive();
    CHECK(hello.header.type == MessageType::hello);
    CHECK(hello.header.worker_id == 4);
    CHECK(std::string(hello.frames.payload.begin(), hello.frames.payload.end()) == token + "{}");  // the same token
    one.send(hello.peer, MessageType::welcome, 30, {40, 50}, 0, kFingerprint + 1, 4);
    CHECK(stepped.get());
    CHECK(x == std::vector<float>{10, 20, 30, 40, 50});  // the reply, and the welcome's x~ for the rejoined range

    // The rule starts again from x: the next payload is exactly the local change.
    for (float& v : x) v += 2.f;
    stepped = std::async(std::launch::async, [&] { return node.after_step(1); });
    const auto again_zero = zero.receive(), again_one = one.receive();
    CHECK(floats_of(again_zero.frames) == std::vector<float>{2, 2, 2});
    CHECK(floats_of(again_one.frames) == std::vector<float>{2, 2});
    CHECK(again_zero.header.center_version == 11);
    CHECK(again_one.header.center_version == 30);  // the rejoin's welcome
    zero.send(again_zero.peer, MessageType::reply, 12, {0, 0, 0}, again_zero.header.sequence, kFingerprint, 4);
    one.send(again_one.peer, MessageType::reply, 31, {0, 0}, again_one.header.sequence, kFingerprint + 1, 4);
    CHECK(stepped.get());
    CHECK(x == std::vector<float>(5, 0.f));
    auto finished = std::async(std::launch::async, [&] { return node.finish(); });
    CHECK(zero.receive().header.type == MessageType::bye);
    CHECK(one.receive().header.type == MessageType::bye);
    CHECK(finished.get().rejoins == 1);
}

TEST_CASE("a server that welcomes the worker under another id than server 0 gave stops it, naming both") {
    FakeCenter zero, one;
    tether::WorkerOptions options;
    options.join_timeout_ms = options.reply_timeout_ms = 5000;
    tether::WorkerNode node(links_to(zero, one, kFingerprint, "tcp://a:1", "tcp://a:2"), options, 4);
    auto joined = std::async(std::launch::async, [&] { node.join(); });
    auto hello = zero.receive();
    zero.send(hello.peer, MessageType::welcome, 0, {1, 2}, 0, kFingerprint, 2);
    zero.send_token(hello.peer, "", 2);  // servers that share no key: an empty token
    hello = one.receive();
    CHECK((hello.header.flags & tether::kFlagToken) == 0);
    one.send(hello.peer, MessageType::welcome, 0, {3, 4}, 0, kFingerprint, 3);
    try {
        joined.get();
        FAIL("a disagreeing id was accepted");
    } catch (const std::exception& e) {
        CHECK(std::string(e.what()).find("server 1 at tcp://a:2 welcomed this worker as id 3, but server 0 gave it id 2") !=
              std::string::npos);
    }
}

TEST_CASE("while one server is slow to reply, the others hear the worker's heartbeats") {
    FakeCenter zero, one;
    tether::SessionOptions options;
    options.join_timeout_ms = options.reply_timeout_ms = 5000;
    options.heartbeat_ms = 50;
    options.center_timeout_ms = 5000;
    tether::ServerSessions session(links_to(zero, one, kFingerprint, "zero", "one"), options, 4);
    auto joined = std::async(std::launch::async, [&] { return session.join(); });
    auto hello = zero.receive();
    zero.send(hello.peer, MessageType::welcome, 0, {1, 2}, 0, kFingerprint, 0);
    zero.send_token(hello.peer, "", 0);
    hello = one.receive();
    one.send(hello.peer, MessageType::welcome, 0, {3, 4}, 0, kFingerprint, 0);
    joined.get();
    tether::Payload payload = tether::Payload::allocate(4 * sizeof(float));
    auto exchanged = std::async(std::launch::async, [&] { return session.exchange(payload, {1, 1}); });
    const auto to_zero = zero.receive(), to_one = one.receive();
    one.send(to_one.peer, MessageType::reply, 1, {0, 0}, to_one.header.sequence);  // server 1 answers at once
    // Server 0 takes 600 ms; meanwhile server 1, already done, keeps hearing from the worker
    // (it would count a silent worker lost), and server 0 too.
    int heartbeats_to_one = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
    while (std::chrono::steady_clock::now() < until) {
        std::string peer;
        Frames frames;
        if (one.endpoint->receive(peer, frames, 50)) ++heartbeats_to_one;
    }
    CHECK(heartbeats_to_one >= 3);
    zero.send(to_zero.peer, MessageType::reply, 1, {0, 0}, to_zero.header.sequence);
    const tether::ExchangeOutcome outcome = exchanged.get();
    CHECK(outcome.rejoined.empty());
    CHECK(outcome.version == 1);
}

TEST_CASE("a server k > 0 that answers `id taken` is asked again until it welcomes the worker") {
    FakeCenter zero, one;
    tether::WorkerOptions options;
    options.join_timeout_ms = options.reply_timeout_ms = 5000;
    options.heartbeat_ms = 20;
    tether::WorkerNode node(links_to(zero, one, kFingerprint, "zero", "one"), options, 4);
    auto joined = std::async(std::launch::async, [&] { return node.join(); });
    auto hello = zero.receive();
    zero.send(hello.peer, MessageType::welcome, 0, {1, 2}, 0, kFingerprint, 3);
    zero.send_token(hello.peer, "", 3);
    // Server 1 still holds id 3 for a worker server 0 has counted lost; a moment later it has too.
    hello = one.receive();
    one.send_error(hello.peer, tether::ErrorCode::id_taken, "id taken: worker id 3 belongs to a live worker here");
    do hello = one.receive();
    while (hello.header.type != MessageType::hello);  // heartbeats may come between
    CHECK(hello.header.worker_id == 3);
    one.send(hello.peer, MessageType::welcome, 0, {3, 4}, 0, kFingerprint, 3);
    CHECK(joined.get().worker_id == 3);
}
