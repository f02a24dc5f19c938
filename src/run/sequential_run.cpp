#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "backend/cpu_backend.hpp"
#include "backend/device_choice.hpp"
#include "cluster/launcher.hpp"
#include "data/load.hpp"
#include "record/run_recorder.hpp"
#include "run/progress_printer.hpp"
#include "run/run.hpp"
#include "run/run_records.hpp"
#include "train/batch_split.hpp"
#include "train/evaluator.hpp"
#include "train/local_trainer.hpp"

namespace tether {

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int threads_per_worker(const RunConfig& config, int workers) {
    if (config.training.threads > 0) return int(config.training.threads);
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    return std::max(1, cores / std::max(1, workers));
}

nlohmann::json run_sequential(const RunConfig& config, const std::string& directory) {
    const int threads = threads_per_worker(config, 1);
    use_cpu_threads(config, threads, 1);
    // Under a launcher (one sequential run per rank), the ranks of a host share its GPUs by local rank.
    const std::optional<Launcher> launcher = read_launcher();
    BackendOptions device = choose_backend(config.training.device, threads, launcher ? launcher->local_rank : 0);
    device.flush_denormals = config.training.flush_denormals;
    device.tf32 = config.training.tf32;
    auto backend = make_backend(device);
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));

    LocalTrainer trainer(config, *backend, DatasetView::whole(data.train), std::uint64_t(config.training.seed));
    const CurveSet curve = curve_set(config, data);
    Evaluator evaluator(config, *backend, curve.data, curve.limit);
    RunRecorder recorder(record_settings(config, data), directory);
    // A run budget (cluster.budget_samples) is the run's length here too: that many samples, in
    // minibatches, however many epochs that takes.
    const auto budget = std::size_t(config.cluster.budget_samples);
    ProgressPrinter progress(config.name, budget > 0 ? double(budget) / double(data.train->size()) : double(config.training.epochs),
                             data.train->size(), curve.name);
    std::atomic<std::uint64_t> samples_so_far{0};
    std::printf("tether run %s: %s on %s, %zu parameters, %zu training / %zu %s samples -> %s\n",
                config.name.c_str(), trainer.model().description().c_str(), trainer.device_description().c_str(),
                trainer.num_parameters(), data.train->size(), evaluator.size(), curve.name.c_str(), directory.c_str());

    // t = 0: the initial parameters, so every curve starts where training starts. No minibatch
    // has run yet: train_loss is the loss on the first 2,000 training samples, as the center
    // of a distributed run measures it at every evaluation.
    {
        EvaluationPoint initial;
        initial.train_loss = Evaluator(config, *backend, data.train, 2000).evaluate(trainer.parameters()).loss;
        const Evaluation e = evaluator.evaluate(trainer.parameters());
        initial.loss = e.loss;
        initial.accuracy = e.accuracy;
        initial.extra["samples_per_second"] = 0.0;
        recorder.record(initial);
        progress.report(initial, 0.0);
    }
    const auto started = Clock::now();  // wall time counts training and evaluation, not loading nor t = 0

    const std::size_t steps_per_epoch = trainer.steps_per_epoch();
    const std::size_t batch = std::size_t(config.training.batch_size);
    const std::size_t total_steps = budget > 0 ? (budget + batch - 1) / batch : steps_per_epoch * std::size_t(config.training.epochs);
    // More evaluations than steps in an epoch would fall between steps: one per step at most.
    const std::size_t per_epoch = std::min<std::size_t>(std::size_t(config.eval.per_epoch), steps_per_epoch);
    progress.start([&samples_so_far] { return LiveStatus{samples_so_far.load(std::memory_order_relaxed), 0}; });
    double training_seconds = 0, loss_sum = 0;
    std::size_t loss_count = 0, next_eval = 1, samples_at_segment_start = 0;
    // eval.every_seconds: also at the first step boundary once that much more training time
    // (evaluations excluded) has passed, so time to target is read off a curve dense in time.
    const double every_seconds = config.eval.every_seconds;
    double next_eval_seconds = every_seconds;
    auto segment_start = Clock::now();
    for (std::size_t step = 1; step <= total_steps; ++step) {
        loss_sum += trainer.step();
        ++loss_count;
        samples_so_far.store(trainer.samples_seen(), std::memory_order_relaxed);
        // Evaluations fall at per_epoch evenly spaced steps of each epoch, the last at its end.
        const std::size_t eval_step = (next_eval * steps_per_epoch) / per_epoch;
        const bool by_samples = step >= eval_step || step == total_steps;
        const bool by_time = every_seconds > 0 && training_seconds + seconds_since(segment_start) >= next_eval_seconds;
        if (!by_samples && !by_time) continue;
        backend->synchronize();
        const double segment_seconds = seconds_since(segment_start);
        training_seconds += segment_seconds;
        // The rate of this segment alone, so a slowdown as training goes on shows at once.
        const double segment_rate = double(trainer.samples_seen() - samples_at_segment_start) / segment_seconds;
        samples_at_segment_start = trainer.samples_seen();
        EvaluationPoint point;
        const Evaluation e = evaluator.evaluate(trainer.parameters());
        point.wall_seconds = seconds_since(started);
        point.training_seconds = training_seconds;
        point.samples = trainer.samples_seen();
        point.epoch = double(point.samples) / double(data.train->size());
        point.train_loss = loss_sum / double(loss_count);
        point.loss = e.loss;
        point.accuracy = e.accuracy;
        point.extra["samples_per_second"] = segment_rate;
        recorder.record(point);
        progress.report(point, segment_rate);
        loss_sum = 0;
        loss_count = 0;
        if (by_samples) ++next_eval;
        if (every_seconds > 0) next_eval_seconds = (std::floor(training_seconds / every_seconds) + 1) * every_seconds;
        segment_start = Clock::now();
    }
    progress.stop();
    const double wall_seconds = seconds_since(started);
    // The test set, once, on the final parameters; after the clock stops, like loading.
    Evaluator test(config, *backend, data.test, std::size_t(config.eval.test_samples));
    const Evaluation final_test = test.evaluate(trainer.parameters());
    nlohmann::json extra = {{"strategy", "sequential"}, {"workers", 1}, {"device", to_string(backend->kind())},
                            {"model", trainer.model().description()}, {"parameters", trainer.num_parameters()}};
    return recorder.finish(wall_seconds, training_seconds, trainer.samples_seen(),
                           FinalTest{final_test.accuracy, final_test.loss, test.size()}, extra);
}

}  // namespace tether
