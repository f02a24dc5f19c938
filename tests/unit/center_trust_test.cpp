// What a center believes, and whom it answers: x~ goes only to joined workers (a
// `snapshot` request from anyone else is refused "not joined"); an exchange is applied once and
// in order (a replayed or reordered one is refused "stale sequence", a pull from a version the
// center never had "future version"); sample claims move the count only as far as a worker can
// have trained, and heartbeats alone add nothing that stays.
#include <doctest/doctest.h>

#include "center/checkpoint.hpp"
#include "center_harness.hpp"

using namespace tether::testing;

namespace {

Header snapshot_request(std::uint64_t sequence) {
    Header h = header(MessageType::snapshot);
    h.sequence = sequence;
    return h;
}

Header heartbeat_claiming(std::uint64_t samples) {
    Header h = header(MessageType::heartbeat);
    h.samples = samples;
    return h;
}

// Sends an exchange and returns the reply's payload.
Vec exchange(Channel& worker, const Header& h, const Vec& payload) {
    send(worker, h, payload);
    Frames frames;
    receive(worker, MessageType::reply, frames);
    return floats_of(frames);
}

}  // namespace

TEST_CASE("a snapshot request from a peer that has not joined is refused, counted, and carries no x~") {
    ServedCenter served(kAeasgd, options_for(1));
    auto stranger = served.connect("stranger");
    send(*stranger, snapshot_request(1), {});
    Frames frames;
    REQUIRE(stranger->receive(frames, 3000));
    tether::ErrorCode reason = tether::ErrorCode::none;
    const auto h = tether::decode(frames.header.data(), frames.header.size(), reason);
    REQUIRE(h.has_value());
    CHECK(h->type == MessageType::error);  // not a snapshot: no x~ in it
    CHECK(starts_with(std::string(frames.payload.begin(), frames.payload.end()), "not joined"));
    CHECK_FALSE(stranger->receive(frames, 200));  // and nothing after it
    // A joined worker may ask: it holds x~ anyway.
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    send(*worker, snapshot_request(2), {});
    CHECK(receive(*worker, MessageType::snapshot, frames).sequence == 2);
    CHECK(floats_of(frames) == kInitial);
    served.finish();
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::not_joined) == 1);
}

TEST_CASE("a replayed or reordered exchange is refused and leaves x~ alone; so is a pull from the future") {
    ServedCenter served(kAeasgd, options_for(1));
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    Header first = exchange_header(1);
    check_equal(exchange(*worker, first, {2.f, 0.f, 5.f}), {0.25f, 0.25f, 1.125f});
    // The same exchange again, byte for byte: refused, x~ untouched.
    CHECK(starts_with(rejection(*worker, tether::encode(first), {2.f, 0.f, 5.f}), "stale sequence: exchange 1 after exchange 1"));
    Header third = exchange_header(3);
    third.center_version = 1;
    exchange(*worker, third, {1.25f, -0.75f, 1.625f});  // a gap is fine: sequences only grow
    Header second = exchange_header(2);  // arrives late: older than one already applied
    second.center_version = 1;
    CHECK(starts_with(rejection(*worker, tether::encode(second), {9.f, 9.f, 9.f}), "stale sequence: exchange 2 after exchange 3"));
    Header future = exchange_header(4);
    future.center_version = std::uint64_t(1) << 63;
    CHECK(starts_with(rejection(*worker, tether::encode(future), {9.f, 9.f, 9.f}),
                      "future version: pulled at version 9223372036854775808, but x~ is at version 2"));
    // After the refusals the next exchange is the worker's fourth: accepted.
    Header fourth = exchange_header(4);
    fourth.center_version = 2;
    exchange(*worker, fourth, {1.25f, -0.75f, 1.625f});
    send(*worker, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    const auto& stats = served.center().stats();
    CHECK(stats.updates_applied == 3);
    CHECK(served.center().state().version == 3);
    CHECK(stats.rejected.at(tether::ErrorCode::stale_sequence) == 2);
    CHECK(stats.rejected.at(tether::ErrorCode::future_version) == 1);
    check_equal(served.center().state().x, {1.25f, -0.75f, 1.625f});  // the later two moved nothing: x_i = x~
}

TEST_CASE("a worker that joins again starts its sequence afresh: its next exchange is accepted") {
    CenterOptions options = options_for(2);
    options.membership.worker_timeout_ms = 300;  // the center forgets a silent worker soon
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker"), keeper = served.connect("keeper");  // the keeper keeps the run going
    send(*worker, header(MessageType::hello, 3), {});
    send(*keeper, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*worker, MessageType::welcome, frames);
    receive(*keeper, MessageType::welcome, frames);
    exchange(*worker, exchange_header(7), {2.f, 0.f, 5.f});
    for (int i = 0; i < 8; ++i) {  // the worker says nothing for 800 ms: counted lost
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        send(*keeper, header(MessageType::heartbeat), {});
        receive(*keeper, MessageType::heartbeat, frames);
    }
    CHECK(starts_with(rejection(*worker, tether::encode(exchange_header(8)), {1.f, 1.f, 1.f}), "unknown worker"));
    // As a resumed center knows no sequence, a center that forgot this worker takes its next one.
    send(*worker, header(MessageType::hello, 3), {});
    receive(*worker, MessageType::welcome, frames);
    check_equal(floats_of(frames), {1.25f, -0.75f, 1.625f});
    Header next = exchange_header(8);
    next.center_version = 1;
    exchange(*worker, next, {1.25f, -0.75f, 1.625f});
    send(*worker, header(MessageType::bye), {});
    send(*keeper, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    CHECK(served.center().stats().updates_applied == 2);
    CHECK(served.center().stats().rejected.count(tether::ErrorCode::stale_sequence) == 0);
}

TEST_CASE("sample claims move the count only as far as a worker can have trained, and heartbeats add nothing that stays") {
    CenterOptions options = options_for(2);
    options.membership.max_samples_per_worker = 100000;
    options.membership.max_samples_per_window = 64;  // a window of 4 steps of 16 samples
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker"), flooder = served.connect("flooder");
    send(*worker, header(MessageType::hello, 3), {});
    send(*flooder, header(MessageType::hello, 3), {});
    Frames frames;
    receive(*worker, MessageType::welcome, frames);
    receive(*flooder, MessageType::welcome, frames);
    // Within two windows of its last exchange (none: 0) a heartbeat's claim is believed...
    send(*flooder, heartbeat_claiming(100), {});
    receive(*flooder, MessageType::heartbeat, frames);
    // ...beyond them it is not, however often it is made.
    for (std::uint64_t claim : {129u, 5000u, 99999u}) {
        send(*flooder, heartbeat_claiming(claim), {});
        receive(*flooder, MessageType::heartbeat, frames);
    }
    // A worker that exchanges moves its bound with each exchange.
    Header h = exchange_header(1);
    h.samples = 64;
    exchange(*worker, h, {1.f, -1.f, 0.5f});
    send(*worker, heartbeat_claiming(190), {});  // 64 + 2 windows = 192 at most
    receive(*worker, MessageType::heartbeat, frames);
    h = exchange_header(2);
    h.samples = 128;
    h.center_version = 1;
    exchange(*worker, h, {1.f, -1.f, 0.5f});
    // The flooder leaves: its 100 heartbeat samples never reached x~ and leave the count.
    Header bye = header(MessageType::bye);
    bye.samples = 100;
    send(*flooder, bye, {});
    send(*worker, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    const auto& stats = served.center().stats();
    CHECK(stats.rejected.at(tether::ErrorCode::implausible_samples) == 3);
    CHECK(stats.total_samples == 128);  // what the worker's exchanges claimed
}

TEST_CASE("a worker coming back says what it trained before; its claims count from there") {
    CenterOptions options = options_for(1);
    options.membership.max_samples_per_worker = 100000;
    options.membership.max_samples_per_window = 64;
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker");
    Header hello = header(MessageType::hello, 3);
    hello.samples = 6400;  // trained before this center knew it (a restart, a loss)
    send(*worker, hello, {});
    Frames frames;
    receive(*worker, MessageType::welcome, frames);
    Header h = exchange_header(1);
    h.samples = 6464;  // one window more: believed, and only the window counted
    exchange(*worker, h, {1.f, -1.f, 0.5f});
    send(*worker, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    CHECK(served.center().stats().total_samples == 64);
    CHECK(served.center().stats().rejected.count(tether::ErrorCode::implausible_samples) == 0);
}

TEST_CASE("a resumed center counts from each place's record: a returning worker adds its increment, a new holder is told the record") {
    tether::Checkpoint saved;
    saved.fingerprint = kFingerprint;
    saved.version = 7;
    saved.total_samples = 960;
    saved.x = kInitial;
    saved.places = {{0, 640}, {1, 320}};
    CenterOptions options = options_for(2);
    options.membership.max_samples_per_worker = 10000;
    ServedCenter served(kAeasgd, options, unique_inproc(), 2000, [&](tether::Center& c) { c.resume(saved); });
    // A fresh worker (it trained nothing itself) takes place 0 and is told how far the place got.
    auto fresh = served.connect("fresh");
    send(*fresh, header(MessageType::hello, kInitial.size()), {});
    Frames frames;
    const Header welcome = receive(*fresh, MessageType::welcome, frames);
    CHECK(welcome.worker_id == 0);
    CHECK(welcome.samples == 640);
    // The worker of place 1 comes back having trained 400: 80 beyond the checkpoint's record count, once.
    auto back = served.connect("back");
    Header hello = header(MessageType::hello, kInitial.size());
    hello.worker_id = 1;
    hello.samples = 400;
    send(*back, hello, {});
    CHECK(receive(*back, MessageType::welcome, frames).worker_id == 1);
    // Their next claims count from there: the fresh holder's 640 + 64 adds 64, not 704.
    send(*fresh, heartbeat_claiming(704), {});
    receive(*fresh, MessageType::heartbeat, frames);
    CHECK(served.center().stats_now().total_samples == 960 + 80 + 64);
    CHECK(served.center().checkpoint().places == std::map<std::uint32_t, std::uint64_t>{{0, 704}, {1, 400}});
}

namespace {

// A checkpoint of a 2-worker run, each place partly trained, and the options of its resumed center.
tether::Checkpoint two_places() {
    tether::Checkpoint saved;
    saved.fingerprint = kFingerprint;
    saved.version = 7;
    saved.x = kInitial;
    saved.places = {{0, 640}, {1, 320}};
    return saved;
}

CenterOptions resumed_options() {
    CenterOptions options = options_for(2);
    options.membership.max_samples_per_worker = 10000;
    options.end.center_restart_ms = 0;
    return options;
}

}  // namespace

TEST_CASE("a resumed center is not over when its first returning worker finishes before the others are back") {
    ServedCenter served(kAeasgd, resumed_options(), unique_inproc(), 2000,
                        [](tether::Center& c) { c.resume(two_places()); });
    auto quick = served.connect("quick");
    join(*quick, 0, kInitial);
    send(*quick, header(MessageType::bye), {});
    // Place 1's worker has not said hello yet: the run waits for it (before, it ended here and
    // the late worker waited for a welcome until its join timeout).
    CHECK_FALSE(served.wait_until_done(300));
}

TEST_CASE("a resumed center whose last worker left after both came back is over") {
    ServedCenter served(kAeasgd, resumed_options(), unique_inproc(), 2000,
                        [](tether::Center& c) { c.resume(two_places()); });
    auto quick = served.connect("quick");
    join(*quick, 0, kInitial);
    send(*quick, header(MessageType::bye), {});
    auto late = served.connect("late");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    join(*late, 0, kInitial);  // place 0 is free again: the lowest free id
    send(*late, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().workers_finished == 2);
}
