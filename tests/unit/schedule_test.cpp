// Learning-rate schedules (<tether/schedule.hpp>): their values in closed form at chosen steps,
// the warm-up before them, the config keys and their errors, and the trainer following them:
// "constant" trains exactly as the warm-up ramp alone did before schedules existed.
#include <doctest/doctest.h>

#include <tether/schedule.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "config/config.hpp"
#include "config_support.hpp"
#include "data/dataset.hpp"
#include "optim/optimizer.hpp"
#include "test_support.hpp"
#include "train/local_trainer.hpp"

namespace {

using namespace tether;
using nlohmann::json;
using tether::testing::contains;
using tether::testing::parse_error;

const double kPi = std::acos(-1.0);

ScheduleOptions cosine(double final_scale) {
    ScheduleOptions o;
    o.name = "cosine";
    o.final_scale = final_scale;
    return o;
}

ScheduleOptions step(std::int64_t every_epochs, std::vector<std::int64_t> milestones, double factor) {
    ScheduleOptions o;
    o.name = "step";
    o.every_epochs = every_epochs;
    o.milestones = std::move(milestones);
    o.factor = factor;
    return o;
}

std::string construction_error(const ScheduleOptions& o, std::size_t total, std::size_t per_epoch) {
    try {
        LearningRateSchedule schedule(o, total, per_epoch);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

std::string text_error(const std::string& text, std::size_t per_epoch = 10) {
    try {
        LearningRateSchedule schedule(text, 100, per_epoch);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

json with_schedule(const json& schedule) { return {{"training", {{"optimizer", {{"schedule", schedule}}}}}}; }

}  // namespace

TEST_CASE("constant is 1 at every step; with a warm-up it is the ramp min(1, (s + 1) / W), exactly") {
    const LearningRateSchedule plain(ScheduleOptions{}, 50);
    for (std::size_t s : {0, 1, 49, 50, 1000}) CHECK(plain.scale(s) == 1.0);
    const LearningRateSchedule ramped(ScheduleOptions{}, 50, 10, 7);
    for (std::size_t s = 0; s < 20; ++s) CHECK(ramped.scale(s) == std::min(1.0, double(s + 1) / 7.0));
    CHECK(ramped.scale(0) == doctest::Approx(1.0 / 7));
    CHECK(ramped.scale(6) == 1.0);
}

TEST_CASE("cosine falls from 1 to final_scale over the planned steps as (1 + cos(pi t / T)) / 2, then stays") {
    const LearningRateSchedule to_zero(cosine(0.0), 100);
    CHECK(to_zero.scale(0) == 1.0);
    CHECK(to_zero.scale(25) == doctest::Approx((1 + std::cos(kPi / 4)) / 2));
    CHECK(to_zero.scale(50) == doctest::Approx(0.5));
    CHECK(to_zero.scale(99) == doctest::Approx((1 + std::cos(kPi * 0.99)) / 2));
    CHECK(to_zero.scale(99) > 0);  // the last planned step still moves
    CHECK(to_zero.scale(100) == doctest::Approx(0.0));
    CHECK(to_zero.scale(5000) == doctest::Approx(0.0));
    const LearningRateSchedule to_tenth(cosine(0.1), 100);
    CHECK(to_tenth.scale(50) == doctest::Approx(0.1 + 0.9 * 0.5));
    CHECK(to_tenth.scale(100) == doctest::Approx(0.1));
    for (std::size_t s = 1; s < 100; ++s) CHECK(to_tenth.scale(s) < to_tenth.scale(s - 1));
}

TEST_CASE("a warm-up ramps first, and the cosine runs over the steps after it") {
    // W = 10 of T = 110: the ramp 0.1, 0.2, ... 1, then cos over the 100 steps left.
    const LearningRateSchedule s(cosine(0.0), 110, 11, 10);
    CHECK(s.scale(0) == doctest::Approx(0.1));
    CHECK(s.scale(4) == doctest::Approx(0.5));
    CHECK(s.scale(9) == doctest::Approx(1.0));
    CHECK(s.scale(10) == doctest::Approx(1.0));
    CHECK(s.scale(35) == doctest::Approx((1 + std::cos(kPi / 4)) / 2));
    CHECK(s.scale(60) == doctest::Approx(0.5));
    CHECK(s.scale(109) == doctest::Approx((1 + std::cos(kPi * 0.99)) / 2));
    CHECK(s.warmup_steps() == 10);
    CHECK(s.total_steps() == 110);
}

TEST_CASE("step multiplies by factor at every every_epochs epochs, or at each milestone, counted from the run's start") {
    const LearningRateSchedule every(step(3, {}, 0.5), 1000, 10);
    CHECK(every.scale(0) == 1.0);
    CHECK(every.scale(29) == 1.0);
    CHECK(every.scale(30) == 0.5);
    CHECK(every.scale(59) == 0.5);
    CHECK(every.scale(60) == 0.25);
    CHECK(every.scale(2000) == doctest::Approx(std::pow(0.5, 66)));  // beyond the plan it goes on
    const LearningRateSchedule at(step(0, {5, 8}, 0.1), 70, 7);
    CHECK(at.scale(34) == 1.0);
    CHECK(at.scale(35) == doctest::Approx(0.1));
    CHECK(at.scale(55) == doctest::Approx(0.1));
    CHECK(at.scale(56) == doctest::Approx(0.01));
    CHECK(at.scale(500) == doctest::Approx(0.01));
    const LearningRateSchedule warm(step(0, {5, 8}, 0.1), 70, 7, 5);  // the ramp over the first epoch's 5 steps
    CHECK(warm.scale(0) == doctest::Approx(0.2));
    CHECK(warm.scale(4) == 1.0);
    CHECK(warm.scale(35) == doctest::Approx(0.1));
}

TEST_CASE("a schedule from JSON text equals the one from its options, and its errors name schedule.KEY") {
    const LearningRateSchedule from_text(R"({"name": "step", "milestones": [2, 4], "factor": 0.3})", 100, 10, 3);
    const LearningRateSchedule from_options(step(0, {2, 4}, 0.3), 100, 10, 3);
    for (std::size_t s = 0; s < 120; ++s) CHECK(from_text.scale(s) == from_options.scale(s));
    CHECK(LearningRateSchedule(R"({"name": "cosine"})", 100).scale(50) == doctest::Approx(0.5));
    CHECK(contains(text_error(R"({"name": "step", "every_epochs": 2, "final_scale": 0})"), "schedule.final_scale: unknown key"));
    CHECK(contains(text_error(R"({"name": "cosin"})"), "did you mean \"cosine\""));
    CHECK(contains(text_error(R"({"name": "step"})"), "schedule.every_epochs: give either every_epochs"));
    CHECK(contains(text_error(R"({"name": "step", "every_epochs": 2})", 0), "steps_per_epoch > 0"));
    CHECK(contains(text_error(R"({"name": "cosine", )"), "schedule: not valid JSON"));
    CHECK(contains(text_error(R"("cosine")"), "schedule: expected a JSON object"));
}

TEST_CASE("options filled by hand are checked too, naming the key and the value") {
    ScheduleOptions unknown;
    unknown.name = "linear";
    CHECK(contains(construction_error(unknown, 100, 10), "schedule.name: \"linear\"; expected one of constant | cosine | step"));
    CHECK(contains(construction_error(cosine(1.5), 100, 10), "schedule.final_scale: 1.5"));
    CHECK(contains(construction_error(cosine(0), 0, 10), "total_steps > 0"));
    CHECK(contains(construction_error(step(2, {}, 0.0), 100, 10), "schedule.factor: 0.0"));
    CHECK(contains(construction_error(step(2, {3}, 0.1), 100, 10), "schedule.every_epochs: given with milestones"));
    CHECK(contains(construction_error(step(0, {}, 0.1), 100, 10), "schedule.every_epochs: 0 and no milestones"));
    CHECK(contains(construction_error(step(0, {5, 3}, 0.1), 100, 10), "schedule.milestones: entry 1 is 3"));
    CHECK(construction_error(step(0, {3, 5}, 0.1), 100, 10).empty());
}

TEST_CASE("training.optimizer.schedule: constant by default, resolved with its keys, strict") {
    const RunConfig plain = parse_config(json::object());
    CHECK(plain.training.optimizer.schedule.name == "constant");
    CHECK(plain.resolved["training"]["optimizer"]["schedule"] == json{{"name", "constant"}});
    const RunConfig c = parse_config(with_schedule({{"name", "cosine"}}));
    CHECK(c.training.optimizer.schedule.name == "cosine");
    CHECK(c.resolved["training"]["optimizer"]["schedule"] == json{{"name", "cosine"}, {"final_scale", 0.0}});
    const RunConfig s = parse_config(with_schedule({{"name", "step"}, {"milestones", {5, 8}}}));
    CHECK(s.training.optimizer.schedule.milestones == std::vector<std::int64_t>{5, 8});
    CHECK(s.training.optimizer.schedule.factor == 0.1);

    CHECK(contains(parse_error(with_schedule({{"name", "cosin"}})),
                   "training.optimizer.schedule.name: \"cosin\" is not allowed; expected one of constant | cosine | step"));
    CHECK(contains(parse_error(with_schedule({{"name", "constant"}, {"final_scale", 0.1}})),
                   "training.optimizer.schedule.final_scale: unknown key"));
    CHECK(contains(parse_error(with_schedule({{"name", "cosine"}, {"final_scale", 2}})),
                   "training.optimizer.schedule.final_scale: expected a number >= 0.0 and <= 1.0, got 2"));
    CHECK(contains(parse_error(with_schedule({{"name", "step"}})), "training.optimizer.schedule.every_epochs: give either"));
    CHECK(contains(parse_error(with_schedule({{"name", "step"}, {"every_epochs", 2}, {"milestones", {3}}})), "not both"));
    CHECK(contains(parse_error(with_schedule({{"name", "step"}, {"milestones", {5, 5}}})),
                   "training.optimizer.schedule.milestones: [5,5] must be in ascending order"));
    CHECK(contains(parse_error(with_schedule({{"name", "step"}, {"every_epochs", 2}, {"factor", 0}})),
                   "training.optimizer.schedule.factor: expected a number > 0.0 and <= 1.0, got 0"));
    CHECK(contains(parse_error(with_schedule("cosine")), "training.optimizer.schedule: expected a JSON object"));
}

namespace {

std::shared_ptr<const Dataset> schedule_data() {
    SyntheticSpec spec;
    spec.features = 16;
    spec.classes = 3;
    spec.train_samples = 600;  // batch 64: 10 steps per epoch, the last of 24 rows
    spec.seed = 5;
    return make_synthetic(spec).train;
}

RunConfig trainer_config(const std::string& optimizer, double learning_rate, double warmup_epochs, const json& schedule) {
    return parse_config({{"data", {{"source", "synthetic"}}},
                         {"model", {{"hidden_layers", {8}}}},
                         {"training", {{"device", "cpu"}, {"threads", 1}, {"batch_size", 64}, {"epochs", 2},
                                       {"optimizer", {{"name", optimizer}, {"learning_rate", learning_rate},
                                                      {"warmup_epochs", warmup_epochs}, {"schedule", schedule}}}}}});
}

std::vector<float> host_parameters(LocalTrainer& trainer) {
    std::vector<float> x(trainer.num_parameters());
    trainer.backend().copy_to_host(x.data(), trainer.parameters(), trainer.num_parameters() * sizeof(float));
    return x;
}

}  // namespace

TEST_CASE("constant with a warm-up trains bit for bit as the ramp lr * min(1, (s + 1) / W) did before schedules") {
    const auto data = schedule_data();
    const RunConfig config = trainer_config("adam", 0.01, 0.5, {{"name", "constant"}});  // W = 5 of 10 steps
    auto backend = make_cpu_backend(1, true);
    LocalTrainer trainer(config, *backend, DatasetView::whole(data), 1);
    REQUIRE(trainer.steps_per_epoch() == 10);

    // The same epoch by hand: the trainer's first shuffle, the model and the optimizer, and the
    // warm-up as LocalTrainer computed it itself until schedules came.
    auto model = make_model(config, *backend, *data);
    auto optimizer = make_optimizer(config.training.optimizer, *backend, model->num_parameters());
    std::vector<float> x(model->num_parameters()), g(x.size()), images(64 * data->features);
    std::vector<std::int32_t> labels(64);
    model->initialize(x.data(), std::uint64_t(config.training.seed));
    CHECK(std::memcmp(x.data(), host_parameters(trainer).data(), x.size() * sizeof(float)) == 0);
    const DatasetView order = DatasetView::whole(data).shuffled(1);
    for (std::size_t s = 0, first = 0; s < 10; ++s) {
        const std::size_t rows = std::min<std::size_t>(64, order.size() - first);
        order.gather(first, rows, images.data(), labels.data());
        first += rows;
        model->evaluate_with_gradient(x.data(), Batch{images.data(), labels.data(), int(rows)}, g.data());
        optimizer->set_learning_rate_scale(float(std::min(1.0, double(s + 1) / 5.0)));
        optimizer->step(x.data(), g.data());
        trainer.step();
    }
    CHECK(std::memcmp(x.data(), host_parameters(trainer).data(), x.size() * sizeof(float)) == 0);
}

TEST_CASE("the trainer follows its schedule: a step decay of 0.5 at epoch 1 halves the first step of epoch 2") {
    const auto data = schedule_data();
    auto moves = [&](const json& schedule) {
        auto backend = make_cpu_backend(1, true);
        LocalTrainer trainer(trainer_config("sgd", 0.1, 0, schedule), *backend, DatasetView::whole(data), 1);
        for (int s = 0; s < 10; ++s) trainer.step();
        const auto before = host_parameters(trainer);
        trainer.step();
        const auto after = host_parameters(trainer);
        std::vector<double> moved(before.size());
        for (std::size_t i = 0; i < before.size(); ++i) moved[i] = double(after[i]) - before[i];
        return std::make_pair(before, moved);
    };
    const auto [at_plain, plain] = moves({{"name", "constant"}});
    const auto [at_decayed, decayed] = moves({{"name", "step"}, {"every_epochs", 1}, {"factor", 0.5}});
    CHECK(at_plain == at_decayed);  // epoch 1 at the full rate in both
    double largest = 0;
    for (std::size_t i = 0; i < plain.size(); ++i) {
        CHECK(decayed[i] == doctest::Approx(plain[i] / 2).epsilon(1e-2).scale(1e-6));
        largest = std::max(largest, std::fabs(plain[i]));
    }
    CHECK(largest > 0);
}
