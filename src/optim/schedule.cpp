// LearningRateSchedule (<tether/schedule.hpp>): the formulas are in the header.
#include <tether/schedule.hpp>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "config/config.hpp"

namespace tether {

namespace {

const double kPi = std::acos(-1.0);

[[noreturn]] void refuse(const std::string& key, const std::string& value, const std::string& expected) {
    throw ConfigError("schedule." + key + ": " + value + "; expected " + expected);
}

// The settings as the struct gives them; a config has been checked key by key already
// (parse_schedule), a struct filled by hand has not.
void check(const ScheduleOptions& o, std::size_t total_steps, std::size_t steps_per_epoch) {
    if (o.name == "constant") return;
    if (o.name == "cosine") {
        if (!(o.final_scale >= 0 && o.final_scale <= 1)) refuse("final_scale", std::to_string(o.final_scale), "a number from 0 to 1");
        if (total_steps == 0) refuse("name", "\"cosine\" over 0 planned steps", "the run's planned local steps (total_steps > 0)");
        return;
    }
    if (o.name != "step") refuse("name", "\"" + o.name + "\"", "one of constant | cosine | step");
    if (!(o.factor > 0 && o.factor <= 1)) refuse("factor", std::to_string(o.factor), "a number > 0 and <= 1");
    if (o.every_epochs < 0) refuse("every_epochs", std::to_string(o.every_epochs), "an integer >= 1 (or 0 with milestones)");
    if ((o.every_epochs > 0) == !o.milestones.empty())
        refuse("every_epochs", o.every_epochs > 0 ? "given with milestones" : "0 and no milestones",
               "one of every_epochs (a decay every E epochs) or milestones (the epochs of the decays)");
    for (std::size_t i = 0; i < o.milestones.size(); ++i)
        if (o.milestones[i] < 1 || (i > 0 && o.milestones[i] <= o.milestones[i - 1]))
            refuse("milestones", "entry " + std::to_string(i) + " is " + std::to_string(o.milestones[i]),
                   "epochs >= 1 in ascending order");
    if (steps_per_epoch == 0) refuse("name", "\"step\" with 0 steps per epoch", "steps_per_epoch > 0 (its decays are in epochs)");
}

ScheduleOptions parse_text(const std::string& text) {
    nlohmann::json document, resolved;
    try {
        document = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw ConfigError("schedule: not valid JSON (" + std::string(e.what()) + "): " + text);
    }
    if (!document.is_object()) throw ConfigError("schedule: expected a JSON object such as {\"name\": \"cosine\"}, got " + text);
    return parse_schedule(JsonReader(&document, "schedule", resolved));
}

}  // namespace

LearningRateSchedule::LearningRateSchedule(ScheduleOptions options, std::size_t total_steps, std::size_t steps_per_epoch,
                                           std::size_t warmup_steps)
    : options_(std::move(options)), total_steps_(total_steps), warmup_steps_(warmup_steps) {
    check(options_, total_steps, steps_per_epoch);
    if (options_.name != "step") return;
    if (options_.every_epochs > 0) decay_steps_.push_back(std::size_t(options_.every_epochs) * steps_per_epoch);
    for (const auto epoch : options_.milestones) decay_steps_.push_back(std::size_t(epoch) * steps_per_epoch);
}

LearningRateSchedule::LearningRateSchedule(const std::string& schedule_json, std::size_t total_steps,
                                           std::size_t steps_per_epoch, std::size_t warmup_steps)
    : LearningRateSchedule(parse_text(schedule_json), total_steps, steps_per_epoch, warmup_steps) {}

double LearningRateSchedule::rest(std::size_t step) const {
    if (options_.name == "cosine") {
        if (total_steps_ <= warmup_steps_) return step < total_steps_ ? 1.0 : options_.final_scale;
        const double span = double(total_steps_ - warmup_steps_);
        const double t = std::min(span, double(step > warmup_steps_ ? step - warmup_steps_ : 0));
        const double f = options_.final_scale;
        return f + (1 - f) * (1 + std::cos(kPi * t / span)) / 2;
    }
    if (options_.name == "step") {
        // every_epochs: one decay each decay_steps_[0] steps, for as long as the run goes.
        const std::size_t decays = options_.every_epochs > 0
                                       ? step / decay_steps_[0]
                                       : std::size_t(std::upper_bound(decay_steps_.begin(), decay_steps_.end(), step) -
                                                     decay_steps_.begin());
        return std::pow(options_.factor, double(decays));
    }
    return 1.0;
}

double LearningRateSchedule::scale(std::size_t step) const {
    // The ramp is min(1, (s + 1) / W) in double, times a rest of exactly 1 for constant: the
    // same float the trainer's warm-up gave before schedules, so constant runs are unchanged.
    const double ramp = warmup_steps_ > 0 ? std::min(1.0, double(step + 1) / double(warmup_steps_)) : 1.0;
    return ramp * rest(step);
}

}  // namespace tether
