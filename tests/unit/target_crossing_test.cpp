// Time to target read between evaluations: the crossing of the straight piece between the last
// evaluation below the target and the first at or above it, worked out by hand.
#include <doctest/doctest.h>

#include "record/target_crossing.hpp"

using tether::TargetWatch;

TEST_CASE("time to target is interpolated between the evaluations around it, in seconds and samples") {
    TargetWatch watch(0.88);
    watch.add(0.0, 0, 0.10);
    watch.add(10.0, 1000, 0.80);
    CHECK_FALSE(watch.crossing());
    watch.add(20.0, 2000, 0.90);  // 0.88 is 8/10 of the way from 0.80 to 0.90
    REQUIRE(watch.crossing());
    CHECK(watch.crossing()->seconds == doctest::Approx(18.0));
    CHECK(watch.crossing()->samples == doctest::Approx(1800.0));
    REQUIRE(watch.crossing()->bracket_seconds);
    CHECK(*watch.crossing()->bracket_seconds == doctest::Approx(10.0));
    // The first crossing stays: a dip and a second rise do not move it.
    watch.add(30.0, 3000, 0.70);
    watch.add(40.0, 4000, 0.95);
    CHECK(watch.crossing()->seconds == doctest::Approx(18.0));
}

TEST_CASE("an evaluation exactly at the target is the time to target") {
    TargetWatch watch(0.5);
    watch.add(0.0, 0, 0.1);
    watch.add(3.0, 300, 0.3);
    watch.add(7.0, 700, 0.5);
    REQUIRE(watch.crossing());
    CHECK(watch.crossing()->seconds == doctest::Approx(7.0));
    CHECK(*watch.crossing()->bracket_seconds == doctest::Approx(4.0));
}

TEST_CASE("the last evaluation below the target opens the piece, not the first") {
    // Below the target at 2 s and at 6 s (after a dip): the piece is 6 s to 8 s.
    TargetWatch watch(0.6);
    watch.add(0.0, 0, 0.1);
    watch.add(2.0, 200, 0.5);
    watch.add(6.0, 600, 0.4);
    watch.add(8.0, 800, 0.8);  // 0.6 is half way from 0.4 to 0.8
    REQUIRE(watch.crossing());
    CHECK(watch.crossing()->seconds == doctest::Approx(7.0));
    CHECK(watch.crossing()->samples == doctest::Approx(700.0));
    CHECK(*watch.crossing()->bracket_seconds == doctest::Approx(2.0));
}

TEST_CASE("a curve that never reaches the target has no time to target") {
    TargetWatch watch(0.9);
    for (int i = 0; i < 5; ++i) watch.add(i, 100.0 * i, 0.2 * i * 0.9 / 0.8 * 0.8);  // 0 .. 0.72
    CHECK_FALSE(watch.crossing());
}

TEST_CASE("a curve that starts at or above the target reached it at its first point, with no bracket") {
    TargetWatch watch(0.3);
    watch.add(0.0, 0, 0.35);
    watch.add(5.0, 500, 0.9);
    REQUIRE(watch.crossing());
    CHECK(watch.crossing()->seconds == 0.0);
    CHECK(watch.crossing()->samples == 0.0);
    CHECK_FALSE(watch.crossing()->bracket_seconds);
}

TEST_CASE("no target: nothing is read off the curve") {
    TargetWatch watch(std::nullopt);
    watch.add(0.0, 0, 0.95);
    CHECK_FALSE(watch.crossing());
}
