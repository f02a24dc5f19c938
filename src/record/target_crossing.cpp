#include "record/target_crossing.hpp"

namespace tether {

void TargetWatch::add(double seconds, double samples, double accuracy) {
    if (!target_ || crossing_) return;
    if (accuracy < *target_) {
        below_ = Point{seconds, samples, accuracy};
        return;
    }
    // A curve that starts at or above the target reached it at its first point (t = 0 for
    // every run tether records, which evaluates the initial model).
    if (!below_) {
        crossing_ = TargetCrossing{seconds, samples, std::nullopt};
        return;
    }
    const Point& a = *below_;
    // a.accuracy < target <= accuracy, so the share is in (0, 1].
    const double share = (*target_ - a.accuracy) / (accuracy - a.accuracy);
    crossing_ = TargetCrossing{a.seconds + share * (seconds - a.seconds), a.samples + share * (samples - a.samples),
                               seconds - a.seconds};
}

}  // namespace tether
