// Membership alone (center/membership.hpp): joins, places, liveness and the warmstart, with no
// socket: the test plays the center, welcoming and losing the workers Membership names.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "center/membership.hpp"

using tether::CenterStats;
using tether::CenterWorker;
using tether::Header;
using tether::Membership;
using tether::MembershipOptions;
using namespace std::chrono_literals;

namespace {

Header hello(std::uint32_t worker_id, std::uint64_t samples = 0) {
    Header h;
    h.type = tether::MessageType::hello;
    h.worker_id = worker_id;
    h.samples = samples;
    return h;
}

MembershipOptions two_workers() {
    MembershipOptions o;
    o.expected_workers = 2;
    o.worker_timeout_ms = 100;
    return o;
}

// Two workers joined and welcomed at t0.
struct TwoWelcomed {
    CenterStats stats;
    Membership m{two_workers(), stats, "test"};
    CenterWorker* a = m.join("a", hello(0)).first;
    CenterWorker* b = m.join("b", hello(1)).first;
    CenterWorker::Clock::time_point t0 = CenterWorker::Clock::now();
    TwoWelcomed() {
        m.welcomed(*a, t0);
        m.welcomed(*b, t0);
    }
};

}  // namespace

TEST_CASE("the run starts when the expected workers have joined; later joiners join it in progress") {
    CenterStats stats;
    Membership m(two_workers(), stats, "test");
    CHECK(m.join("a", hello(0)).second == Membership::Joined::waits);
    CHECK_FALSE(m.started());
    const auto [b, joined] = m.join("b", hello(0));
    CHECK(joined == Membership::Joined::starts_run);
    CHECK(b->id == 1);  // id 0 is held: the lowest free one
    CHECK(m.started());
    CHECK(m.joining().size() == 2);
    CHECK(m.full());
    CHECK(m.id_held(1, "a"));
    CHECK_FALSE(m.id_held(1, "b"));  // its own
}

TEST_CASE_FIXTURE(TwoWelcomed, "a worker silent past worker_timeout_ms is lost, and its place can be taken back") {
    m.count_samples(*a, 40, /*exchange=*/true);
    a->accepted_sequence = 1;  // it exchanged: its place holds trained data
    CHECK_FALSE(m.next_silent(t0 + 50ms, std::nullopt));
    b->last_seen = t0 + 150ms;  // b heard from; a not
    const auto silent = m.next_silent(t0 + 200ms, std::nullopt);
    REQUIRE(silent);
    CHECK(silent->worker == a);
    CHECK(silent->why.find("cluster.worker_timeout_ms") != std::string::npos);
    CHECK(m.lose(*a, silent->why) == Membership::Loss::lost);
    CHECK(m.lose(*a, "again") == Membership::Loss::none);
    CHECK(stats.workers_lost == 1);
    CHECK(stats.live_workers() == 1);
    CHECK_FALSE(m.next_silent(t0 + 200ms, std::nullopt));
    CHECK_FALSE(m.full());
    m.prune();
    CHECK(m.workers().size() == 1);
    // A restarted worker asks for its old id and gets it, with what its place trained.
    const auto [back, joined] = m.join("a-restarted", hello(0, 40));
    CHECK(joined == Membership::Joined::joins_run);
    CHECK(back->id == 0);
    CHECK(back->samples == 40);
    CHECK(stats.places_retaken == 1);
    CHECK(stats.total_samples == 40);  // counted once
}

TEST_CASE_FIXTURE(TwoWelcomed, "a worker that asks for no place takes a lost one before a finished one") {
    // Worker 0 finished its shard; worker 1 was lost mid-run (a host killed). A worker started
    // again without its id (a `tether worker` restarted by a supervisor) must train what place 1
    // left, not place 0's finished shard.
    m.finish(*a, 40);
    b->accepted_sequence = 1;
    CHECK(m.lose(*b, "killed") == Membership::Loss::lost);
    m.prune();
    const auto [back, joined] = m.join("restarted", hello(0));
    CHECK(joined == Membership::Joined::joins_run);
    CHECK(back->id == 1);
    CHECK(stats.places_retaken == 1);
}

TEST_CASE("a welcomed worker lost before its first exchange is silent, and a peer never welcomed is dropped") {
    CenterStats stats;
    Membership m(two_workers(), stats, "test");
    CenterWorker* a = m.join("a", hello(0)).first;
    CenterWorker* b = m.join("b", hello(1)).first;
    m.welcomed(*a, CenterWorker::Clock::now());
    CHECK(m.lose(*a, "test") == Membership::Loss::lost);
    CHECK(m.lose(*b, "test") == Membership::Loss::dropped);
    CHECK(stats.workers_silent == 1);
    CHECK(stats.peers_dropped == 1);
    CHECK(stats.workers_lost == 0);
    CHECK(stats.live_workers() == 0);
}

TEST_CASE_FIXTURE(TwoWelcomed, "while a synchronous round waits, a worker that sent no exchange for worker_timeout_ms is lost") {
    a->in_round = true;           // waiting for the round's reply: never silent
    b->last_seen = t0 + 150ms;    // heartbeats only
    CHECK_FALSE(m.next_silent(t0 + 160ms, std::nullopt));
    const auto silent = m.next_silent(t0 + 160ms, t0 + 10ms);
    REQUIRE(silent);
    CHECK(silent->worker == b);
    CHECK(silent->why.find("synchronous round") != std::string::npos);
}

TEST_CASE("the warmstart holds every worker but worker 0 until the samples are counted, once") {
    MembershipOptions o = two_workers();
    o.warmstart_samples = 100;
    CenterStats stats;
    Membership m(o, stats, "test");
    CenterWorker* zero = m.join("a", hello(0)).first;
    CenterWorker* one = m.join("b", hello(1)).first;
    CHECK(m.warming_up());
    CHECK_FALSE(m.hold(*zero));
    CHECK(m.hold(*one));
    m.welcomed(*zero, CenterWorker::Clock::now());
    CHECK(m.release_held().empty());
    m.count_samples(*zero, 100, /*exchange=*/true);
    CHECK_FALSE(m.warming_up());
    const auto released = m.release_held();
    REQUIRE(released.size() == 1);
    CHECK(released.front() == one);
    CHECK_FALSE(one->held);
    CHECK(m.release_held().empty());
}

TEST_CASE("a sample claim beyond the worker's bounds is not counted, and a count only grows") {
    MembershipOptions o = two_workers();
    o.max_samples_per_window = 10;
    o.max_samples_per_worker = 1000;
    CenterStats stats;
    Membership m(o, stats, "test");
    CenterWorker* a = m.join("a", hello(0)).first;
    m.count_samples(*a, 15, /*exchange=*/true);
    CHECK(stats.total_samples == 15);
    m.count_samples(*a, 40);  // more than two windows past its last exchange
    CHECK(stats.rejected[tether::ErrorCode::implausible_samples] == 1);
    m.count_samples(*a, 30);  // a heartbeat within two windows
    m.count_samples(*a, 20);  // older
    CHECK(stats.total_samples == 30);
    // Leaving drops what heartbeats claimed beyond the last exchange: it never reached x~.
    m.finish(*a, 30);
    CHECK(stats.total_samples == 15);
    CHECK(m.places().at(0) == 15);
}
