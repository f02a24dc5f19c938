// The snapshot schedule alone (center/snapshot_schedule.hpp): when x~ is handed out for
// evaluation and checkpoints, and the requests for the final x~ that wait for the end.
#include <doctest/doctest.h>

#include <chrono>

#include "center/snapshot_schedule.hpp"

using tether::SnapshotOptions;
using tether::SnapshotSchedule;
using namespace std::chrono_literals;

TEST_CASE("a snapshot every samples_per_snapshot samples, and a final one unless the last is the final state") {
    SnapshotOptions o;
    o.samples_per_snapshot = 100;
    SnapshotSchedule s(o);
    CHECK_FALSE(s.due(50, 1, false));
    CHECK(s.due(120, 2, false));
    CHECK_FALSE(s.due(150, 3, false));  // the next one is at 200
    CHECK(s.due(230, 4, false));
    CHECK_FALSE(s.due(230, 4, true));   // final, but unchanged since the last one
    CHECK(s.due(250, 5, true));
    CHECK_FALSE(s.due(250, 5, true));
}

TEST_CASE("without periodic snapshots only the final one is taken; a resumed schedule goes on from the checkpoint") {
    SnapshotSchedule none(SnapshotOptions{});
    CHECK_FALSE(none.due(1000, 10, false));
    CHECK(none.due(1000, 10, true));
    SnapshotOptions o;
    o.samples_per_snapshot = 100;
    SnapshotSchedule resumed(o);
    resumed.resume(250);
    CHECK_FALSE(resumed.due(260, 1, false));
    CHECK(resumed.due(300, 2, false));
}

TEST_CASE("the first checkpoint follows the first update, then one every checkpoint_ms") {
    SnapshotOptions o;
    o.checkpoint_ms = 10000;
    SnapshotSchedule s(o);
    s.start(5);
    const auto t0 = SnapshotSchedule::Clock::now();
    CHECK_FALSE(s.checkpoint_due(t0 + 1h, 5));  // no update since the start: nothing to save
    CHECK_FALSE(s.checkpoint_due(t0, 6));
    CHECK(s.checkpoint_due(t0 + 2s, 6));
    s.checkpoint_written(t0 + 2s);
    CHECK_FALSE(s.checkpoint_due(t0 + 5s, 7));
    CHECK(s.checkpoint_due(t0 + 12s, 7));
}

TEST_CASE("requests for the final x~ wait for the end, a bounded number of them") {
    SnapshotSchedule s(SnapshotOptions{});
    tether::Header request;
    for (std::size_t i = 0; i < SnapshotSchedule::kMaxFinalRequests; ++i) CHECK(s.wait_for_end("lead", request));
    CHECK_FALSE(s.wait_for_end("one too many", request));
    CHECK(s.take_waiting().size() == SnapshotSchedule::kMaxFinalRequests);
    CHECK(s.take_waiting().empty());
    CHECK_FALSE(s.answered_final());
    s.final_answered();
    CHECK(s.answered_final());
}
