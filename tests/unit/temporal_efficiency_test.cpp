// Temporal efficiency: the time each run spends below the accuracy both reach, against
// curves whose answer is worked out by hand.
#include <doctest/doctest.h>

#include "sweep/temporal_efficiency.hpp"
#include "test_support.hpp"

using tether::AccuracyCurve;

TEST_CASE("time below a level is the area between the running best accuracy and the level") {
    // From (0, 0.1) to (4, 0.9): below 0.9 for 4 s, 0.8 at first, a triangle of 0.5 * 4 * 0.8.
    const AccuracyCurve rise{{{0.0, 0.1}, {4.0, 0.9}, {10.0, 0.9}}};
    CHECK(tether::time_below(rise, 0.9) == doctest::Approx(1.6));
    // Level 0.5 is met half way (t = 2): 0.5 * 2 * 0.4.
    CHECK(tether::time_below(rise, 0.5) == doctest::Approx(0.4));
    // A level at or under the start costs nothing.
    CHECK(tether::time_below(rise, 0.1) == 0.0);
    // Without a point at t = 0 the curve starts at (0, 0): from (0, 0) to (2, 0.8), 0.5 * 2 * 0.8.
    const AccuracyCurve old_style{{{2.0, 0.8}}};
    CHECK(tether::time_below(old_style, 0.8) == doctest::Approx(0.8));
}

TEST_CASE("a dip after a peak does not count: the running best accuracy is what is reached") {
    // Up to 0.6 at t = 1, down to 0.2 at t = 2, up to 1.0 at t = 4. The running best stays at 0.6
    // until the curve climbs past it again at t = 3 (0.2 + 0.4 * 1), then follows it to 1.0.
    const AccuracyCurve noisy{{{0.0, 0.2}, {1.0, 0.6}, {2.0, 0.2}, {4.0, 1.0}}};
    // Below 1.0: (0.8 + 0.4) / 2 * 1  +  0.4 * 2  +  0.4 / 2 * 1  =  0.6 + 0.8 + 0.2.
    CHECK(tether::time_below(noisy, 1.0) == doctest::Approx(1.6));
}

TEST_CASE("a run that reaches every accuracy 4x sooner has temporal efficiency 4, whatever the horizon") {
    // Both from 10% at t = 0 to 90%: fast at t = 4, slow at t = 16; both run 40 s. The ratio of
    // the areas under the curves over the 40 s, the definition this one replaces, is
    // (2 + 0.9 * 36) / (8 + 0.9 * 24) = 1.16: the plateau swamps the rise.
    const AccuracyCurve fast{{{0.0, 0.1}, {4.0, 0.9}, {40.0, 0.9}}};
    const AccuracyCurve slow{{{0.0, 0.1}, {16.0, 0.9}, {40.0, 0.9}}};
    CHECK(*tether::temporal_efficiency(fast, slow) == doctest::Approx(4.0));
    CHECK(*tether::temporal_efficiency(slow, fast) == doctest::Approx(0.25));
    CHECK(*tether::temporal_efficiency(slow, slow) == doctest::Approx(1.0));
    // Stopping the fast run as soon as it is at 90%, or running the slow one 10x longer,
    // changes nothing: time after the level is reached is not counted.
    const AccuracyCurve fast_stopped{{{0.0, 0.1}, {4.0, 0.9}}};
    const AccuracyCurve slow_long{{{0.0, 0.1}, {16.0, 0.9}, {400.0, 0.9}}};
    CHECK(*tether::temporal_efficiency(fast_stopped, slow_long) == doctest::Approx(4.0));
}

TEST_CASE("the common level is the lower best accuracy: speed is compared where both runs go") {
    // The fast run stops at 50%, reached at t = 1 (from 10% at t = 0); the slow run reaches 50%
    // at t = 5 on its way to 90% at t = 10. Below 50%: 0.5 * 1 * 0.4 against 0.5 * 5 * 0.4.
    const AccuracyCurve fast_low{{{0.0, 0.1}, {1.0, 0.5}, {20.0, 0.5}}};
    const AccuracyCurve slow_high{{{0.0, 0.1}, {10.0, 0.9}}};
    CHECK(*tether::temporal_efficiency(fast_low, slow_high) == doctest::Approx(5.0));
}

TEST_CASE("temporal efficiency is undefined when there is nothing to reach") {
    const AccuracyCurve flat{{{0.0, 0.5}, {10.0, 0.5}}}, rising{{{0.0, 0.1}, {10.0, 0.5}}};
    CHECK_FALSE(tether::temporal_efficiency(flat, flat).has_value());   // both start at the level
    CHECK_FALSE(tether::temporal_efficiency(flat, rising).has_value()); // the run is there at t = 0
    CHECK(*tether::temporal_efficiency(rising, flat) == 0.0);           // the reference is
    CHECK_FALSE(tether::temporal_efficiency(AccuracyCurve{}, rising).has_value());
}

TEST_CASE("curves are read from metrics.jsonl in time order, validation accuracy first") {
    tether::testing::TempDir dir;
    tether::testing::write_text(dir.file("metrics.jsonl"),
                                "{\"wall_seconds\": 2.0, \"validation_accuracy\": 0.6, \"test_accuracy\": 0.1}\n"
                                "{\"wall_seconds\": 1.0, \"validation_accuracy\": 0.5}\n\n");
    const AccuracyCurve curve = tether::read_accuracy_curve(dir.file("metrics.jsonl"));
    REQUIRE(curve.points.size() == 2);
    CHECK(curve.points[0].first == 1.0);
    CHECK(curve.points[1].second == 0.6);
    CHECK(curve.end() == 2.0);
    // A run without a validation split (or from before it) has test_accuracy only.
    tether::testing::write_text(dir.file("old.jsonl"), "{\"wall_seconds\": 1.0, \"test_accuracy\": 0.7}\n");
    CHECK(tether::read_accuracy_curve(dir.file("old.jsonl")).points.at(0).second == 0.7);
    CHECK_THROWS_WITH(tether::read_accuracy_curve(dir.file("missing.jsonl")),
                      doctest::Contains("missing.jsonl: cannot read"));
}
