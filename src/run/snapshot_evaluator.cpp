#include "run/snapshot_evaluator.hpp"

#include <cstdio>

#include "backend/device_choice.hpp"
#include "backend/float_mode.hpp"
#include "record/center_figures.hpp"
#include "run/run_records.hpp"

namespace tether {

SnapshotEvaluator::SnapshotEvaluator(const RunConfig& config, const TrainTestSplit& data, RunRecorder& recorder,
                                     ProgressPrinter& progress, std::unique_ptr<RemoteRanges> remote)
    : config_(config), data_(data), recorder_(recorder), progress_(progress), remote_(std::move(remote)) {
    BackendOptions options = choose_backend(config.training.eval_device, 1, 0);
    options.tf32 = config.training.tf32;  // as a sequential run, which evaluates on its training backend
    backend_ = make_backend(options);
    const CurveSet curve = curve_set(config, data);
    curve_ = std::make_unique<Evaluator>(config, *backend_, curve.data, curve.limit);
    // The center's training loss is measured on a fixed slice of the training set.
    train_ = std::make_unique<Evaluator>(config, *backend_, data.train, 2000);
}

SnapshotEvaluator::~SnapshotEvaluator() {
    if (thread_.joinable()) finish();
}

void SnapshotEvaluator::start() {
    thread_ = std::thread([this] {
        set_flush_denormals(config_.training.flush_denormals);
        backend_->use_on_this_thread();  // training.eval_device may name any GPU
        loop();
    });
}

void SnapshotEvaluator::push(PendingSnapshot snapshot) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The first snapshot (x~ at t = 0, the curve's first point) is never replaced: a run that
    // trains faster than one evaluation would otherwise start its curve at the end. The next
    // one waits behind it.
    const bool first = pushed_++ == 0;
    if (!queue_.empty() && !(queue_.size() == 1 && first_waiting_)) {
        // The final snapshot is pushed last, so the one waiting is never final. A final one
        // marked not to be recorded is unchanged since the one waiting: it is recorded instead.
        PendingSnapshot& waiting = queue_.back();
        if (!snapshot.record) snapshot.record = waiting.record;
        else if (waiting.record) ++skipped_;
        waiting = std::move(snapshot);
    } else {
        queue_.push_back(std::move(snapshot));
    }
    if (first) first_waiting_ = true;
    ready_.notify_one();
}

std::size_t SnapshotEvaluator::waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size();
}

std::uint64_t SnapshotEvaluator::skipped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return skipped_;
}

std::vector<float> SnapshotEvaluator::finish() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        done_ = true;
        ready_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    if (failure_) std::rethrow_exception(failure_);
    return final_x_;
}

void SnapshotEvaluator::loop() {
    while (true) {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return done_ || !queue_.empty(); });
        if (queue_.empty()) return;
        PendingSnapshot s = std::move(queue_.front());
        queue_.pop_front();
        first_waiting_ = false;
        lock.unlock();
        if (remote_ && !remote_->empty()) {
            try {
                remote_->fetch(s.x.data(), s.final);
            } catch (const std::exception& e) {
                if (s.final) {
                    failure_ = std::current_exception();
                    continue;
                }
                std::fprintf(stderr, "server 0: evaluation at %.1f s skipped: %s\n", s.wall_seconds, e.what());
                continue;
            }
        }
        if (s.record) score(s);
        if (s.final) final_x_ = std::move(s.x);
    }
}

void SnapshotEvaluator::score(PendingSnapshot& s) {
    const Evaluation on_curve = curve_->evaluate_host(s.x.data());
    const Evaluation train = train_->evaluate_host(s.x.data());
    EvaluationPoint p;
    p.wall_seconds = s.wall_seconds;
    p.training_seconds = s.wall_seconds;
    p.samples = s.stats.total_samples;
    p.epoch = double(p.samples) / double(data_.train->size());
    p.train_loss = train.loss;
    p.loss = on_curve.loss;
    p.accuracy = on_curve.accuracy;
    p.extra = exchange_figures(s.stats, s.version, previous_, s.wall_seconds - previous_wall_);
    const double rate = p.extra["samples_per_second"];
    previous_ = s.stats;
    previous_wall_ = s.wall_seconds;
    recorder_.record(p);
    progress_.report(p, rate);
}

}  // namespace tether
