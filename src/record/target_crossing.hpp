// When a curve first reaches a target accuracy, read between its evaluations.
//
// Evaluations are seconds apart, so "the first evaluation at or above the target" snaps the
// time to their grid: at one evaluation every 12.5 s, three seeds read 51.8, 51.1 and 37.7 s
// (measured). The curve is taken as linear between the last evaluation below the target and
// the first at or above it, and the crossing is read off that piece, in wall seconds and in
// samples; the piece's width (bracket_seconds) says how far the reading can be off.
#pragma once

#include <cstddef>
#include <optional>

namespace tether {

struct TargetCrossing {
    double seconds = 0;                     // wall seconds at which the curve meets the target
    double samples = 0;                     // training samples there (all workers together)
    std::optional<double> bracket_seconds;  // width of the piece it lies on; none: the first point reached it
};

// Fed the curve's points in order of time; remembers the first crossing of `target`.
class TargetWatch {
public:
    explicit TargetWatch(std::optional<double> target) : target_(target) {}
    void add(double wall_seconds, double samples, double accuracy);
    // Nothing when there is no target or the curve has not reached it (yet).
    const std::optional<TargetCrossing>& crossing() const { return crossing_; }

private:
    struct Point {
        double seconds, samples, accuracy;
    };
    std::optional<double> target_;
    std::optional<Point> below_;  // the last point below the target
    std::optional<TargetCrossing> crossing_;
};

}  // namespace tether
