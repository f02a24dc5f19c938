// Whether a run's model learned: a run can finish every step, lose no worker and still end with
// a model no better than where it started (a learning rate of 1000, 32 ADAG workers with too
// large a step, an unauthenticated peer that replaced x~). Such a run is failed (exit 1, and a
// sweep counts it so) unless eval.require_learning is false, which keeps the finding as a
// warning for deliberate experiments. The rules, each on the curve set (validation, or test
// where there is no split):
//   - the final loss is not finite (x~ left NaN or infinite);
//   - the final loss is above the loss of the model as it started (the curve's point at 0
//     samples; a resumed run's first point is not one);
//   - the final accuracy is no better than chance: below the largest class's share of the set
//     plus kChanceMargin (a model that always answers that class reaches the share itself).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "data/dataset.hpp"

namespace tether {

// One point of accuracy above chance: less is "no better than chance" (an evaluation of a few
// thousand samples measures accuracy to about a point).
inline constexpr double kChanceMargin = 0.01;

// What a run's records know; unset: not known, and the rule that needs it is skipped.
struct LearningFacts {
    std::optional<double> initial_loss = {}, final_loss = {}, final_accuracy = {}, chance_accuracy = {};
};

// The largest class's share among the first `limit` samples of `data` (0: all); what a model
// that learned nothing reaches by always answering that class.
double chance_accuracy(const Dataset& data, std::size_t limit);

// Writes into `summary`: initial_<set>_loss and chance_accuracy where known, and `learned`
// where any rule could be checked; when one failed, learning_failure (the reason, with the
// figures) and, if `required`, run_failed and failure_reason (unless the run already failed for
// another reason), else learning_warning. judge_run (record/run_verdict.hpp) keeps the finding.
void judge_learning(nlohmann::json& summary, const std::string& set, const LearningFacts& facts, bool required);

}  // namespace tether
