// The end of the run alone (center/run_end.hpp): when a center's run is over, from its counters.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "center/run_end.hpp"

using tether::CenterStats;
using tether::MembershipOptions;
using tether::RunEnd;
using tether::RunEndOptions;
using namespace std::chrono_literals;

namespace {

MembershipOptions two_places() {
    MembershipOptions o;
    o.expected_workers = 2;
    o.join_timeout_ms = 1000;
    return o;
}

CenterStats joined_and_finished(int joined, int finished) {
    CenterStats s;
    s.workers_joined = joined;
    s.workers_finished = finished;
    return s;
}

}  // namespace

TEST_CASE("a resumed center is not over until as many workers as it had places came back, or the join timeout passed") {
    RunEnd end(RunEndOptions{}, two_places(), "test");
    const auto t0 = RunEnd::Clock::now();
    end.start(t0);
    // The first worker back finished before the other said hello.
    CHECK_FALSE(end.over(true, /*resumed=*/true, joined_and_finished(1, 1), t0 + 10ms));
    CHECK(end.over(true, /*resumed=*/false, joined_and_finished(1, 1), t0 + 10ms));
    CHECK(end.over(true, /*resumed=*/true, joined_and_finished(2, 2), t0 + 10ms));
    CHECK(end.over(true, /*resumed=*/true, joined_and_finished(1, 1), t0 + 1100ms));
    // Never before the run started, nor while a worker is live.
    CHECK_FALSE(end.over(false, false, joined_and_finished(0, 0), t0 + 10ms));
    CHECK_FALSE(end.over(true, false, joined_and_finished(2, 1), t0 + 10ms));
}

TEST_CASE("when every worker went silent the run waits center_restart_ms for them; a join ends the wait") {
    RunEndOptions o;
    o.center_restart_ms = 500;
    RunEnd end(o, two_places(), "test");
    const auto t0 = RunEnd::Clock::now();
    end.start(t0);
    CenterStats lost = joined_and_finished(2, 0);
    lost.workers_lost = 2;
    end.all_silent(t0);
    CHECK_FALSE(end.over(true, false, lost, t0 + 100ms));
    CHECK(end.over(true, false, lost, t0 + 600ms));
    end.joined();
    CHECK(end.over(true, false, lost, t0 + 100ms));
    // No restart window: the run is over as soon as no worker is live.
    o.center_restart_ms = 0;
    RunEnd at_once(o, two_places(), "test");
    at_once.start(t0);
    at_once.all_silent(t0);
    CHECK(at_once.over(true, false, lost, t0 + 1ms));
}

TEST_CASE("a run that has not started within join_timeout_ms fails, naming the setting") {
    RunEnd end(RunEndOptions{}, two_places(), "test");
    const auto t0 = RunEnd::Clock::now();
    end.start(t0);
    const CenterStats one = joined_and_finished(1, 0);
    CHECK_NOTHROW(end.check_started(false, one, t0 + 500ms, "inproc://here"));
    CHECK_NOTHROW(end.check_started(true, one, t0 + 2s, "inproc://here"));
    try {
        end.check_started(false, one, t0 + 2s, "inproc://here");
        FAIL("no error");
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        CHECK(what.find("only 1 of 2 workers") != std::string::npos);
        CHECK(what.find("cluster.join_timeout_ms") != std::string::npos);
        CHECK(what.find("inproc://here") != std::string::npos);
    }
}

TEST_CASE("a server awaiting the final request leaves once server 0 confirmed its answer arrived, not on the answer alone") {
    RunEndOptions o;
    o.await_final_snapshot = true;
    RunEnd end(o, two_places(), "test");
    const auto t0 = RunEnd::Clock::now();
    CHECK_FALSE(end.leaves(false, false, t0));
    CHECK_FALSE(end.leaves(false, false, t0 + 500ms));
    // Answered late in the wait: the answer has its own join_timeout_ms to arrive.
    CHECK_FALSE(end.leaves(true, false, t0 + 900ms));
    CHECK_FALSE(end.leaves(true, false, t0 + 1500ms));
    CHECK(end.leaves(true, true, t0 + 1600ms));
    CHECK(end.leaves(true, false, t0 + 2000ms));
    // Never asked: join_timeout_ms after the run was over.
    RunEnd unasked(o, two_places(), "test");
    CHECK_FALSE(unasked.leaves(false, false, t0));
    CHECK(unasked.leaves(false, false, t0 + 1100ms));
    RunEnd plain(RunEndOptions{}, two_places(), "test");
    CHECK(plain.leaves(false, false, t0));
}
