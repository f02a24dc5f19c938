// Learning-rate schedules: the factor by which a local optimizer's learning rate is multiplied
// at each local step. One implementation serves tether's own trainer (the config keys
// training.optimizer.schedule and training.optimizer.warmup_epochs, docs/config.md) and
// embedding users, who own their optimizer and multiply its learning rate by scale(step)
// (docs/embedding.md; from Python, tether.LearningRateSchedule, docs/python.md).
//
// With W warm-up steps and T planned steps (s = 0, 1, ... the step about to be taken):
//   scale(s) = ramp(s) * rest(s),   ramp(s) = min(1, (s + 1) / W)   (1 when W = 0)
//   constant: rest(s) = 1
//   cosine:   rest(s) = f + (1 - f) (1 + cos(pi t / (T - W))) / 2,  t = s - W clamped to [0, T - W]
//             (Loshchilov & Hutter, SGDR, ICLR 2017, without restarts): the ramp first, then one
//             half cosine from 1 at the first step after it to f = final_scale after the last
//   step:     rest(s) = factor^k, k = the decays that step s has reached; the decay at epoch e
//             (every_epochs, 2 every_epochs, ... or each of milestones; epochs of the run, counted
//             from its start as metrics.jsonl counts them) lands at step e * steps_per_epoch
// Past T, cosine stays at f. In a distributed run T is each worker's own plan (its shard's steps
// per epoch x epochs), so every worker follows its own schedule over its own local steps.
//
//   tether::LearningRateSchedule schedule(R"({"name": "cosine", "final_scale": 0.0})", total_steps);
//   for (std::size_t s = 0; s < total_steps; ++s) my_sgd_step(lr * schedule.scale(s));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tether/errors.hpp>

namespace tether {

// A schedule's settings, named as the keys of a training.optimizer.schedule block.
struct ScheduleOptions {
    std::string name = "constant";         // constant | cosine | step
    double final_scale = 0;                // cosine: rest at the end of the run, 0 to 1
    std::int64_t every_epochs = 0;         // step: a decay every this many epochs (0: milestones)
    std::vector<std::int64_t> milestones;  // step: the epochs of the decays, ascending
    double factor = 0.1;                   // step: what each decay multiplies by, > 0 and <= 1
};

class LearningRateSchedule {
public:
    // `steps_per_epoch` is needed by step schedules only (0 elsewhere is fine). Throws
    // ConfigError for settings outside their range, naming the key and the value.
    LearningRateSchedule(ScheduleOptions options, std::size_t total_steps, std::size_t steps_per_epoch = 0,
                         std::size_t warmup_steps = 0);
    // The same from the JSON text of a schedule block, e.g. R"({"name": "step", "milestones": [5, 8]})",
    // with the config's keys and checks (errors name "schedule.KEY").
    LearningRateSchedule(const std::string& schedule_json, std::size_t total_steps, std::size_t steps_per_epoch = 0,
                         std::size_t warmup_steps = 0);

    // The factor for local step `step`, counted from 0.
    double scale(std::size_t step) const;

    const ScheduleOptions& options() const { return options_; }
    std::size_t total_steps() const { return total_steps_; }
    std::size_t warmup_steps() const { return warmup_steps_; }

private:
    double rest(std::size_t step) const;

    ScheduleOptions options_;
    std::size_t total_steps_, warmup_steps_;
    std::vector<std::size_t> decay_steps_;  // step: every_epochs in steps, or where each milestone lands
};

}  // namespace tether
