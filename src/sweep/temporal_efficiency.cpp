#include "sweep/temporal_efficiency.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace tether {

namespace {

// The integral of max(0, c - y) over a piece where y goes linearly from y0 to y1 in `width`.
double shortfall(double c, double y0, double y1, double width) {
    const double d0 = c - y0, d1 = c - y1;
    if (d0 >= 0 && d1 >= 0) return (d0 + d1) / 2 * width;
    if (d0 <= 0 && d1 <= 0) return 0.0;
    const double crossing = d0 / (d0 - d1);  // fraction of the piece where y meets c
    return d0 > 0 ? d0 * crossing * width / 2 : d1 * (1 - crossing) * width / 2;
}

}  // namespace

double AccuracyCurve::best() const {
    double best = 0;
    for (const auto& point : points) best = std::max(best, point.second);
    return best;
}

double time_below(const AccuracyCurve& curve, double ceiling) {
    double area = 0, t0 = 0, y0 = 0, peak = 0;  // the curve starts at (0, 0) unless it says otherwise
    for (const auto& [t, y] : curve.points) {
        if (peak >= ceiling) break;  // reached: m stays at or above c from here on
        if (t <= t0) {
            y0 = y;  // a point at time 0 (or a repeated time) moves the start, it adds no area
            peak = std::max(peak, y);
            continue;
        }
        // On this piece the curve goes linearly from (t0, y0) to (t, y), and y0 <= peak. The
        // running maximum m stays at the peak until the curve climbs past it, then follows it.
        const double width = t - t0;
        if (y <= peak) {
            area += shortfall(ceiling, peak, peak, width);
        } else {
            const double flat = (peak - y0) / (y - y0);  // share of the piece below the old peak
            area += shortfall(ceiling, peak, peak, flat * width) + shortfall(ceiling, peak, y, (1 - flat) * width);
            peak = y;
        }
        t0 = t;
        y0 = y;
    }
    return area;
}

std::optional<double> temporal_efficiency(const AccuracyCurve& a, const AccuracyCurve& reference) {
    if (a.points.empty() || reference.points.empty()) return std::nullopt;
    const double level = std::min(a.best(), reference.best());
    const double run_area = time_below(a, level), reference_area = time_below(reference, level);
    if (run_area <= 0) return std::nullopt;  // a is at the level from t = 0: no ratio says how much sooner
    return reference_area / run_area;
}

AccuracyCurve read_accuracy_curve(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot read the run's metrics");
    AccuracyCurve curve;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.contains("wall_seconds")) continue;
        const char* key = j.contains("validation_accuracy") ? "validation_accuracy" : "test_accuracy";
        if (!j.contains(key)) continue;
        curve.points.emplace_back(j["wall_seconds"].get<double>(), j[key].get<double>());
    }
    std::sort(curve.points.begin(), curve.points.end());
    return curve;
}

}  // namespace tether
