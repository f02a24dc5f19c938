// Temporal efficiency: areas under accuracy-over-time curves, against values worked by hand.
#include <doctest/doctest.h>

#include "sweep/temporal_efficiency.hpp"
#include "test_support.hpp"

using tether::AccuracyCurve;

TEST_CASE("the area under a curve is the trapezoids from (0, 0), held at the last accuracy") {
    // (0,0)-(1,0.5): 0.25; (1,0.5)-(3,0.9): 2 * 0.7 = 1.4; held 0.9 for 1 s to t = 4: 0.9.
    const AccuracyCurve a{{{1.0, 0.5}, {3.0, 0.9}}};
    CHECK(tether::area_under(a, 3.0) == doctest::Approx(1.65));
    CHECK(tether::area_under(a, 4.0) == doctest::Approx(2.55));
    // A horizon inside a segment interpolates: at t = 2 the curve is at 0.7;
    // 0.25 + (0.5 + 0.7) / 2 * 1 = 0.85.
    CHECK(tether::area_under(a, 2.0) == doctest::Approx(0.85));
}

TEST_CASE("temporal efficiency is the ratio of the areas over the later end time") {
    // Fast: reaches 0.8 at t = 1 and stops; slow: 0.4 at t = 2, 0.8 at t = 4.
    const AccuracyCurve fast{{{1.0, 0.8}}}, slow{{{2.0, 0.4}, {4.0, 0.8}}};
    // Horizon 4. fast: 0.4 + 3 * 0.8 = 2.8. slow: 0.4 + (0.4 + 0.8) / 2 * 2 = 1.6.
    CHECK(tether::temporal_efficiency(fast, slow) == doctest::Approx(2.8 / 1.6));
    CHECK(tether::temporal_efficiency(slow, fast) == doctest::Approx(1.6 / 2.8));
    CHECK(tether::temporal_efficiency(slow, slow) == doctest::Approx(1.0));
}

TEST_CASE("curves are read from metrics.jsonl in time order") {
    tether::testing::TempDir dir;
    tether::testing::write_text(dir.file("metrics.jsonl"),
                                "{\"wall_seconds\": 2.0, \"test_accuracy\": 0.6}\n"
                                "{\"wall_seconds\": 1.0, \"test_accuracy\": 0.5}\n\n");
    const AccuracyCurve curve = tether::read_accuracy_curve(dir.file("metrics.jsonl"));
    REQUIRE(curve.points.size() == 2);
    CHECK(curve.points[0].first == 1.0);
    CHECK(curve.end() == 2.0);
    CHECK_THROWS_WITH(tether::read_accuracy_curve(dir.file("missing.jsonl")),
                      doctest::Contains("missing.jsonl: cannot read"));
}
