// Rounds alone (center/rounds.hpp): when a synchronous round may close, with no socket and no rule.
#include <doctest/doctest.h>

#include <chrono>

#include "center/rounds.hpp"

using tether::CenterWorker;
using tether::RoundOptions;
using tether::Rounds;
using namespace std::chrono_literals;

namespace {

RoundOptions half_in(int timeout_ms) {
    RoundOptions o;
    o.quorum = 0.5;
    o.round_timeout_ms = timeout_ms;
    return o;
}

}  // namespace

TEST_CASE("a round closes when every live worker reported, or at its deadline with a quorum") {
    Rounds rounds(half_in(100));
    CenterWorker a, b, c;
    CHECK_FALSE(rounds.open());
    CHECK_FALSE(rounds.opened());
    CHECK_FALSE(rounds.complete(4, true));
    const auto t0 = CenterWorker::Clock::now();
    rounds.add(a, t0);
    rounds.add(b, t0 + 20ms);
    CHECK(rounds.opened() == t0);
    CHECK(a.in_round);
    CHECK_FALSE(rounds.past_deadline(t0 + 50ms));
    CHECK(rounds.past_deadline(t0 + 150ms));
    // Two of four live workers: the quorum (0.5), but only at the deadline.
    CHECK_FALSE(rounds.complete(4, false));
    CHECK(rounds.complete(4, true));
    // Two of five: below the quorum, ceil(0.5 × 5) = 3.
    CHECK_FALSE(rounds.complete(5, true));
    rounds.add(c, t0 + 30ms);
    CHECK(rounds.complete(3, false));  // every live worker
    const auto closed = rounds.close(t0 + 40ms);
    CHECK(closed.size() == 3);
    CHECK_FALSE(rounds.open());
    for (const CenterWorker* w : closed) {
        CHECK_FALSE(w->in_round);
        CHECK(w->last_seen == t0 + 40ms);  // it waited on the center: not silent
    }
}

TEST_CASE("a contributor lost while waiting counts towards x~, not towards the live workers a round waits for") {
    Rounds rounds(half_in(100));
    CenterWorker a, b;
    const auto t0 = CenterWorker::Clock::now();
    rounds.add(a, t0);
    rounds.add(b, t0);
    b.state = CenterWorker::State::lost;
    CHECK_FALSE(rounds.complete(2, false));
    CHECK(rounds.complete(1, false));  // the one live worker reported
    CHECK(rounds.close(t0).size() == 2);
}
