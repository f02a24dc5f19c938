// Temporal efficiency: how much sooner a run reaches the accuracies a reference run reaches.
//
// Hermans (master's thesis, Maastricht University, 2017) compares two methods by the ratio
// of the areas under their accuracy-over-time curves. Over a whole run that ratio hardly
// moves: both curves spend most of the run on their plateau, so the plateau's area swamps
// the rise: two curves from 10% to 90% accuracy, one at 90% after 4 s, the other after 16 s,
// both run for 40 s, give 34.4 / 29.6 = 1.16. tether keeps the areas of the same plots but
// measures them along the time axis (here 6.4 / 1.6 = 4):
//
//   A(run) = integral over t of max(0, c - m(t)) dt = integral over levels l < c of T(l) dl
//   E(run, reference) = A(reference) / A(run)
//
// m(t) is the best accuracy reached by time t (the running maximum of the piecewise-linear
// curve through the evaluations), T(l) the first time the run reaches level l, and c the
// lower of the two runs' best accuracies, a level both reach. A is the mean time to reach an
// accuracy level below c (times c), so E = 4 when the run reaches every level 4x sooner, and
// E = 1/4 when 4x later, however long either run goes on afterwards. Read E beside the final
// accuracies: it says nothing about accuracy above c. A curve without an evaluation at t = 0
// (run directories written before tether evaluated there) is taken to start at (0 s, 0).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tether {

struct AccuracyCurve {
    std::vector<std::pair<double, double>> points;  // (wall seconds, accuracy), increasing time
    double end() const { return points.empty() ? 0.0 : points.back().first; }
    double best() const;
};

// A(curve) above: the area between the curve's running maximum and the level `ceiling`.
double time_below(const AccuracyCurve& curve, double ceiling);
// E(a, reference); nullopt when it is undefined: a curve is empty, or both start at or above
// the common level (nothing to reach), or `a` starts there and the reference does not.
std::optional<double> temporal_efficiency(const AccuracyCurve& a, const AccuracyCurve& reference);

// Reads (wall_seconds, accuracy) from a run directory's metrics.jsonl: validation_accuracy,
// or test_accuracy in runs without a validation split (and those written before it).
AccuracyCurve read_accuracy_curve(const std::string& metrics_path);

}  // namespace tether
