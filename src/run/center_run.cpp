#include "run/center_run.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "algorithms/strategy.hpp"
#include "backend/backend.hpp"
#include "backend/float_mode.hpp"
#include "center/center.hpp"
#include "protocol/header.hpp"
#include "run/progress.hpp"
#include "run/run_recorder.hpp"
#include "train/evaluator.hpp"
#include "train/local_trainer.hpp"

namespace tether {

using Clock = std::chrono::steady_clock;

ModelIdentity model_identity(const RunConfig& config, const Dataset& train) {
    auto backend = make_backend({"cpu", 1, 0});
    auto model = make_model(config, *backend, train);
    ModelIdentity id;
    id.num_parameters = model->num_parameters();
    id.fingerprint = fingerprint(id.num_parameters, model->layer_sizes(), config.strategy.name);
    id.initial.resize(id.num_parameters);
    model->initialize(id.initial.data(), std::uint64_t(config.training.seed));
    id.description = model->description();
    return id;
}

// Snapshots of x~ queue up here; one thread evaluates them in order, so the center never
// waits for an evaluation.
struct CenterRun::State {
    const RunConfig& config;
    TrainTestSplit data;
    ModelIdentity identity;
    std::unique_ptr<Center> center;
    RunRecorder recorder;
    Progress progress;
    std::ofstream exchanges;
    std::unique_ptr<Backend> eval_backend;
    std::unique_ptr<Evaluator> test_eval, train_eval;
    Clock::time_point started;

    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::pair<Snapshot, double>> queue;  // snapshot, wall seconds when taken
    bool done = false;
    CenterStats previous;
    double previous_wall = 0;

    State(const RunConfig& c, const TrainTestSplit& d, const std::string& directory)
        : config(c), data(d), identity(model_identity(c, *d.train)), recorder(c, directory),
          progress(c.name, double(c.training.epochs), d.train->size()) {}

    void evaluate_loop() {
        while (true) {
            std::unique_lock<std::mutex> lock(mutex);
            ready.wait(lock, [&] { return done || !queue.empty(); });
            if (queue.empty()) return;
            auto [snapshot, wall] = std::move(queue.front());
            queue.pop_front();
            lock.unlock();
            record(snapshot, wall);
        }
    }

    void record(const Snapshot& s, double wall) {
        const Evaluation test = test_eval->evaluate_host(s.x.data());
        const Evaluation train = train_eval->evaluate_host(s.x.data());
        EvaluationPoint p;
        p.wall_seconds = wall;
        p.training_seconds = wall;
        p.samples = s.stats.total_samples;
        p.epoch = double(p.samples) / double(data.train->size());
        p.train_loss = train.loss;
        p.test_loss = test.loss;
        p.test_accuracy = test.accuracy;
        const double exchanges_since = double(s.stats.staleness_count - previous.staleness_count);
        p.extra = {{"center_version", s.version},
                   {"live_workers", s.stats.live_workers()},
                   {"bytes_to_center", s.stats.bytes_received},
                   {"bytes_to_workers", s.stats.bytes_sent},
                   {"rejected_messages", s.stats.rejected_total()},
                   {"mean_staleness", exchanges_since > 0 ? (s.stats.staleness_sum - previous.staleness_sum) / exchanges_since : 0.0}};
        // The rate since the previous evaluation, so a slowdown shows at once.
        const double rate = wall > previous_wall ? double(p.samples - previous.total_samples) / (wall - previous_wall) : 0.0;
        p.extra["samples_per_second"] = rate;
        previous = s.stats;
        previous_wall = wall;
        recorder.record(p);
        progress.report(p, rate);
    }
};

CenterRun::CenterRun(const RunConfig& config, const TrainTestSplit& data, Transport& transport,
                     const std::string& address, const std::string& directory)
    : state_(std::make_unique<State>(config, data, directory)) {
    State& s = *state_;
    const ClusterConfig& k = config.cluster;
    TransportOptions transport_options;
    transport_options.max_message_bytes = kHeaderBytes + std::size_t(k.shard_elements) * sizeof(float) + 4096;
    CenterOptions options;
    options.expected_workers = int(k.workers);
    options.fingerprint = s.identity.fingerprint;
    options.shard_elements = std::size_t(k.shard_elements);
    options.quorum = k.quorum;
    options.round_timeout_ms = int(k.round_timeout_ms);
    options.worker_timeout_ms = int(k.worker_timeout_ms);
    options.join_timeout_ms = int(k.join_timeout_ms);
    options.samples_per_snapshot = data.train->size() / std::size_t(config.eval.per_epoch);
    const StrategyContext context{int(k.workers), s.identity.num_parameters};
    s.center = std::make_unique<Center>(transport.bind(address, transport_options),
                                        config.strategy.rule->make_center_rule(context), s.identity.initial, options);
    s.eval_backend = make_backend({"cpu", 1, 0});
    s.test_eval = std::make_unique<Evaluator>(config, *s.eval_backend, data.test, std::size_t(config.eval.test_samples));
    // The center's training loss is measured on a fixed slice of the training set.
    s.train_eval = std::make_unique<Evaluator>(config, *s.eval_backend, data.train, 2000);
    s.exchanges.open(s.recorder.directory() + "/exchanges.jsonl");
    s.center->on_exchange = [&s](const ExchangeRecord& r) {
        s.exchanges << nlohmann::json{{"worker", r.worker_id},       {"sequence", r.sequence},
                                      {"version", r.version},         {"staleness", r.staleness},
                                      {"bytes_to_center", r.bytes_received}, {"bytes_to_worker", r.bytes_sent},
                                      {"update_norm", r.update_norm}}
                           .dump()
                    << "\n";
    };
    s.center->on_snapshot = [&s](Snapshot&& snapshot) {
        const double wall = std::chrono::duration<double>(Clock::now() - s.started).count();
        std::lock_guard<std::mutex> lock(s.mutex);
        s.queue.emplace_back(std::move(snapshot), wall);
        s.ready.notify_one();
    };
}

CenterRun::~CenterRun() = default;

std::string CenterRun::address() const { return state_->center->address(); }

void CenterRun::stop() { state_->center->stop(); }

nlohmann::json CenterRun::serve() {
    State& s = *state_;
    std::printf("tether %s: %s, strategy %s, %lld workers, center at %s -> %s\n", s.config.name.c_str(),
                s.identity.description.c_str(), s.config.strategy.rule->describe().dump().c_str(),
                static_cast<long long>(s.config.cluster.workers), address().c_str(), s.recorder.directory().c_str());
    std::fflush(stdout);
    // This is the center's thread in every mode (backend/float_mode.hpp).
    set_flush_denormals(s.config.training.flush_denormals);
    s.started = Clock::now();
    std::thread evaluator([&s] {
        set_flush_denormals(s.config.training.flush_denormals);
        s.evaluate_loop();
    });
    Center* center = s.center.get();
    s.progress.start([center] { return LiveStatus{center->live_samples(), center->live_version()}; });
    std::exception_ptr failure;
    try {
        s.center->serve();
    } catch (...) {
        failure = std::current_exception();
    }
    const double wall = std::chrono::duration<double>(Clock::now() - s.started).count();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.done = true;
        s.ready.notify_one();
    }
    evaluator.join();
    s.progress.stop();
    s.exchanges.flush();
    if (failure) std::rethrow_exception(failure);
    const CenterStats& stats = s.center->stats();
    nlohmann::json extra = stats.to_json();
    extra["strategy"] = s.config.strategy.name;
    extra["strategy_parameters"] = s.config.strategy.rule->describe();
    extra["workers"] = s.config.cluster.workers;
    extra["communication_window"] = s.config.strategy.rule->communication_window();
    extra["center_version"] = s.center->state().version;
    extra["bytes_sent"] = stats.bytes_sent + stats.bytes_received;  // all traffic, both ways
    extra["bytes_to_workers"] = stats.bytes_sent;
    extra["bytes_to_center"] = stats.bytes_received;
    extra["worker_lost"] = stats.workers_lost > 0;
    extra["model"] = s.identity.description;
    extra["parameters"] = s.identity.num_parameters;
    extra["mode"] = s.config.cluster.mode;
    extra["device"] = s.config.training.device;  // what the workers were asked to train on
    return s.recorder.finish(wall, wall, stats.total_samples, extra);
}

}  // namespace tether
