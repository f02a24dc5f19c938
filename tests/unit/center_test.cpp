// The Center serving well-formed workers: the aeasgd exchange over the wire, the join barrier
// and its timeout, synchronous rounds (closing on all live workers, or at the deadline with a
// quorum, folding a late report into the next round), and a silent worker counted lost.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "center_harness.hpp"

using namespace tether::testing;  // the harness, and the protocol names it re-exports

TEST_CASE("aeasgd over the wire: hello, welcome, exchange, reply e, bye") {
    ServedCenter served(kAeasgd, options_for(1));
    auto worker = served.connect("worker-a");
    join(*worker, 0, kInitial);

    Header h = exchange_header(1);
    h.center_version = 0;
    h.samples = 64;
    send(*worker, h, {2.f, 0.f, 5.f});
    Frames frames;
    const Header reply = receive(*worker, MessageType::reply, frames);
    CHECK(reply.sequence == 1);
    CHECK(reply.center_version == 1);
    CHECK(reply.dtype == Dtype::float32);
    CHECK((reply.flags & tether::kFlagLastChunk) != 0);
    check_equal(floats_of(frames), {0.25f, 0.25f, 1.125f});  // e = 0.25 ((2, 0, 5) - (1, -1, 0.5))

    send(*worker, header(MessageType::heartbeat), {});
    send(*worker, header(MessageType::bye), {});
    // The only worker said bye: serve() returns by itself.
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    const auto& stats = served.center().stats();
    check_equal(served.center().state().x, {1.25f, -0.75f, 1.625f});
    CHECK(served.center().state().version == 1);
    CHECK(stats.exchanges == 1);
    CHECK(stats.updates_applied == 1);
    CHECK(stats.workers_joined == 1);
    CHECK(stats.workers_finished == 1);
    CHECK(stats.workers_lost == 0);
    CHECK(stats.rejected_total() == 0);
    CHECK(stats.total_samples == 64);
    CHECK(stats.bytes_received > 0);
    // welcome + reply + the answer to the heartbeat (a header alone)
    CHECK(stats.bytes_sent == 2 * (tether::kHeaderBytes + 3 * sizeof(float)) + tether::kHeaderBytes);
}

TEST_CASE("the join barrier: no welcome until every expected worker has said hello") {
    ServedCenter served(kAeasgd, options_for(2));
    auto first = served.connect("worker-a");
    auto second = served.connect("worker-b");
    send(*first, header(MessageType::hello, 3), {});
    Frames frames;
    CHECK_FALSE(first->receive(frames, 300));  // waiting for the second worker
    // Not welcomed yet: its exchange is refused, not applied.
    CHECK(starts_with(rejection(*first, tether::encode(exchange_header(1)), {2.f, 0.f, 5.f}), "not welcomed"));

    send(*second, header(MessageType::hello, 3), {});
    const Header a = receive(*first, MessageType::welcome, frames);
    CHECK(floats_of(frames) == kInitial);
    const Header b = receive(*second, MessageType::welcome, frames);
    CHECK(floats_of(frames) == kInitial);
    CHECK(a.worker_id == 0);
    CHECK(b.worker_id == 1);

    send(*first, header(MessageType::bye), {});
    send(*second, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().workers_joined == 2);
    CHECK(served.center().stats().workers_finished == 2);
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::not_welcomed) == 1);
    CHECK(served.center().state().x == kInitial);
}

TEST_CASE("the center gives up when not every worker joins in time") {
    CenterOptions options = options_for(2);
    options.membership.join_timeout_ms = 200;
    ServedCenter served(kAeasgd, options);
    auto only = served.connect("worker-a");
    send(*only, header(MessageType::hello, 3), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE(served.failure());
    try {
        std::rethrow_exception(served.failure());
    } catch (const std::runtime_error& e) {
        const std::string message = e.what();
        CHECK_MESSAGE(message.find("only 1 of 2 workers joined") != std::string::npos, message);
        CHECK_MESSAGE(message.find("cluster.join_timeout_ms") != std::string::npos, message);
    }
}

TEST_CASE("a synchronous round closes when every live worker has reported") {
    ServedCenter served({{"name", "averaging"}}, options_for(2));
    auto first = served.connect("worker-a");
    auto second = served.connect("worker-b");
    send(*first, header(MessageType::hello, 3), {});
    send(*second, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*first, MessageType::welcome, frames);
    receive(*second, MessageType::welcome, frames);

    send(*first, exchange_header(1), {2.f, 0.f, 5.f});
    CHECK_FALSE(first->receive(frames, 200));  // the round waits for the second worker
    send(*second, exchange_header(1), {0.f, 4.f, 1.f});
    for (Channel* c : {first.get(), second.get()}) {
        const Header r = receive(*c, MessageType::reply, frames);
        CHECK(r.center_version == 1);
        CHECK(r.sequence == 1);
        check_equal(floats_of(frames), {1.f, 2.f, 3.f});
    }
    served.finish();
    REQUIRE_FALSE(served.failure());
    check_equal(served.center().state().x, {1.f, 2.f, 3.f});
    CHECK(served.center().stats().rounds == 1);
    CHECK(served.center().stats().exchanges == 2);
}

TEST_CASE("a silent worker is counted lost and no longer blocks the round") {
    CenterOptions options = options_for(2);
    options.membership.worker_timeout_ms = 300;
    ServedCenter served({{"name", "averaging"}}, options);
    auto alive = served.connect("worker-a");
    auto silent = served.connect("worker-b");
    // The silent worker was last seen at its welcome, which comes after this.
    const auto hello_sent = std::chrono::steady_clock::now();
    send(*alive, header(MessageType::hello, 3), {});
    send(*silent, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*alive, MessageType::welcome, frames);
    receive(*silent, MessageType::welcome, frames);

    send(*alive, exchange_header(1), {2.f, 0.f, 5.f});
    // The reply comes once the silent worker is lost: the mean of the one contribution.
    const Header r = receive(*alive, MessageType::reply, frames, 5000);
    CHECK(std::chrono::steady_clock::now() - hello_sent >= std::chrono::milliseconds(300));
    CHECK(r.center_version == 1);
    check_equal(floats_of(frames), {2.f, 0.f, 5.f});

    // A message from the lost worker is refused.
    CHECK(starts_with(rejection(*silent, tether::encode(exchange_header(1)), {0.f, 4.f, 1.f}), "unknown worker"));

    send(*alive, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    const auto& stats = served.center().stats();
    CHECK(stats.workers_silent == 1);  // lost before its first exchange
    CHECK(stats.workers_lost == 0);
    CHECK(stats.workers_finished == 1);
    CHECK(stats.rounds == 1);
    check_equal(served.center().state().x, {2.f, 0.f, 5.f});
}

TEST_CASE("a round closes at its deadline with a quorum; the late report is folded into the next round") {
    CenterOptions options = options_for(2);
    options.rounds.quorum = 0.5;
    options.rounds.round_timeout_ms = 200;
    ServedCenter served({{"name", "averaging"}}, options);
    auto prompt = served.connect("worker-a");
    auto late = served.connect("worker-b");
    send(*prompt, header(MessageType::hello, 3), {});
    send(*late, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*prompt, MessageType::welcome, frames);
    receive(*late, MessageType::welcome, frames);

    // Round 1 closes at its deadline with 1 of 2 (quorum ceil(0.5 * 2) = 1).
    send(*prompt, exchange_header(1), {2.f, 0.f, 5.f});
    Header r = receive(*prompt, MessageType::reply, frames, 5000);
    CHECK(r.center_version == 1);
    check_equal(floats_of(frames), {2.f, 0.f, 5.f});

    // The late worker reports against version 0: counted late, and part of round 2.
    Header h = exchange_header(1);
    h.center_version = 0;
    send(*late, h, {0.f, 4.f, 1.f});
    h = exchange_header(2);
    h.center_version = 1;
    send(*prompt, h, {4.f, 2.f, 3.f});
    for (Channel* c : {late.get(), prompt.get()}) {
        r = receive(*c, MessageType::reply, frames, 5000);
        CHECK(r.center_version == 2);
        check_equal(floats_of(frames), {2.f, 3.f, 2.f});
    }
    served.finish();
    REQUIRE_FALSE(served.failure());
    const auto& stats = served.center().stats();
    CHECK(stats.rounds == 2);
    CHECK(stats.late_reports == 1);
    CHECK(stats.workers_lost == 0);
    check_equal(served.center().state().x, {2.f, 3.f, 2.f});
}

TEST_CASE("a burst from a peer the center does not know gets one 'unknown worker' answer, and its hello a welcome") {
    // As after a center's restart: the heartbeats a worker queued while the center was away
    // all arrive at once. One answer tells it to join again; twenty would fill its small-message
    // queue ahead of the welcome it is about to ask for.
    ServedCenter served(kAeasgd, options_for(1));
    auto worker = served.connect("worker-back");
    for (int k = 0; k < 20; ++k) send(*worker, header(MessageType::heartbeat), {});
    CHECK(starts_with(receive_error(*worker), "unknown worker"));
    Frames frames;
    CHECK_FALSE(worker->receive(frames, 200));  // no second answer
    join(*worker, 0, kInitial);
    send(*worker, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::unknown_worker) == 20);
}
