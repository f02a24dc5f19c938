#include "sweep/temporal_efficiency.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace tether {

double area_under(const AccuracyCurve& curve, double horizon) {
    double area = 0, t0 = 0, a0 = 0;  // the curve starts at (0, 0)
    for (const auto& [t, a] : curve.points) {
        if (t <= t0) {
            a0 = a;  // a point at time 0 (or a repeated time) moves the start, it adds no area
            continue;
        }
        const double t1 = std::min(t, horizon);
        if (t1 > t0) area += (t1 - t0) * (a0 + (a0 + (a - a0) * (t1 - t0) / (t - t0))) / 2;
        if (t >= horizon) return area;
        t0 = t;
        a0 = a;
    }
    return area + std::max(0.0, horizon - t0) * a0;  // held at the last accuracy
}

double temporal_efficiency(const AccuracyCurve& a, const AccuracyCurve& reference) {
    const double horizon = std::max(a.end(), reference.end());
    const double denominator = area_under(reference, horizon);
    return denominator > 0 ? area_under(a, horizon) / denominator : 0.0;
}

AccuracyCurve read_accuracy_curve(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot read the run's metrics");
    AccuracyCurve curve;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("wall_seconds") || !j.contains("test_accuracy")) continue;
        curve.points.emplace_back(j["wall_seconds"].get<double>(), j["test_accuracy"].get<double>());
    }
    std::sort(curve.points.begin(), curve.points.end());
    return curve;
}

}  // namespace tether
