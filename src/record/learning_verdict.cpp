#include "record/learning_verdict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace tether {

namespace {

std::string figure(double value, const char* format = "%.4g") {
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
}

std::string percent(double value) { return figure(100.0 * value, "%.2f") + "%"; }

// Why the model did not learn, or "" when every rule that could be checked passed.
std::string why_not_learned(const std::string& set, const LearningFacts& f) {
    if (f.final_loss && !std::isfinite(*f.final_loss))
        return "x~ is not finite at the end (final " + set + " loss " + figure(*f.final_loss) + ")";
    if (f.final_loss && f.initial_loss && *f.final_loss > *f.initial_loss)
        return "the model did not learn: final " + set + " loss " + figure(*f.final_loss) + " is above the initial " +
               figure(*f.initial_loss) + " (x~(0))";
    if (f.final_accuracy && f.chance_accuracy && *f.final_accuracy < *f.chance_accuracy + kChanceMargin)
        return "the model did not learn: final " + set + " accuracy " + percent(*f.final_accuracy) +
               " is no better than chance (" + percent(*f.chance_accuracy) + ", the largest class's share)";
    return "";
}

}  // namespace

double chance_accuracy(const Dataset& data, std::size_t limit) {
    const std::size_t n = limit > 0 ? std::min(limit, data.size()) : data.size();
    if (n == 0) return 0;
    std::map<std::int32_t, std::size_t> counts;
    std::size_t largest = 0;
    for (std::size_t i = 0; i < n; ++i) largest = std::max(largest, ++counts[data.labels[i]]);
    return double(largest) / double(n);
}

void judge_learning(nlohmann::json& summary, const std::string& set, const LearningFacts& f, bool required) {
    if (f.initial_loss) summary["initial_" + set + "_loss"] = *f.initial_loss;
    if (f.chance_accuracy) summary["chance_accuracy"] = *f.chance_accuracy;
    const bool judged = (f.final_loss && (!std::isfinite(*f.final_loss) || f.initial_loss)) ||
                        (f.final_accuracy && f.chance_accuracy);
    if (!judged) return;
    const std::string reason = why_not_learned(set, f);
    summary["learned"] = reason.empty();
    summary["learning_required"] = required;
    if (reason.empty()) return;
    summary["learning_failure"] = reason;
    if (!required) {
        summary["learning_warning"] = reason + " (eval.require_learning is false: the run is not failed for it)";
        return;
    }
    if (summary.value("run_failed", false)) return;
    summary["run_failed"] = true;
    summary["failure_reason"] = reason;
}

}  // namespace tether
