// Temporal efficiency (Hermans, "On the Parallelization of Stochastic Gradient Descent",
// 2017): E(a, b) = the area under run a's test-accuracy-over-time curve divided by run b's,
// over a common horizon. E > 1: a reaches higher accuracy sooner than b.
//
// Conventions, so that figures are comparable across runs: each curve is piecewise linear
// through its evaluations, starts at (0 s, 0 accuracy), and holds its last accuracy after its
// last evaluation (a finished run keeps its model). The horizon is the later of the two end
// times, so a run that is done early keeps earning area at its final accuracy.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tether {

struct AccuracyCurve {
    std::vector<std::pair<double, double>> points;  // (wall seconds, test accuracy), increasing time
    double end() const { return points.empty() ? 0.0 : points.back().first; }
};

double area_under(const AccuracyCurve& curve, double horizon);
double temporal_efficiency(const AccuracyCurve& a, const AccuracyCurve& reference);

// Reads (wall_seconds, test_accuracy) from a run directory's metrics.jsonl.
AccuracyCurve read_accuracy_curve(const std::string& metrics_path);

}  // namespace tether
