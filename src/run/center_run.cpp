#include "run/center_run.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <limits>
#include <mutex>
#include <thread>

#include "strategy/configured_strategy.hpp"
#include "backend/backend.hpp"
#include "backend/device_choice.hpp"
#include "backend/float_mode.hpp"
#include "center/center.hpp"
#include "center/checkpoint.hpp"
#include "codec/wire_vector.hpp"
#include "protocol/header.hpp"
#include "run/agreed_settings.hpp"
#include "run/progress.hpp"
#include "transport/curve_keys.hpp"
#include "util/errors.hpp"
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
    id.agreed = agreed_settings(config, model->layer_sizes(), id.num_parameters);
    id.fingerprint = settings_fingerprint(id.agreed);
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
    Transport& transport;
    ModelIdentity identity;
    std::unique_ptr<Center> center;
    RunRecorder recorder;
    Progress progress;
    std::ofstream exchanges;
    std::unique_ptr<Backend> eval_backend;
    CurveSet curve;
    std::unique_ptr<Evaluator> curve_eval, train_eval;
    Clock::time_point started;
    bool resumed;

    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::pair<Snapshot, double>> queue;  // snapshot, wall seconds when taken
    bool done = false;
    CenterStats previous;
    double previous_wall = 0;

    State(const RunConfig& c, const TrainTestSplit& d, Transport& t, const std::string& directory, bool resume)
        : config(c), data(d), transport(t), identity(model_identity(c, *d.train)), recorder(c, directory, resume),
          progress(c.name, double(c.training.epochs), d.train->size(), curve_set(c, d).name), curve(curve_set(c, d)),
          resumed(resume) {}

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
        const Evaluation on_curve = curve_eval->evaluate_host(s.x.data());
        const Evaluation train = train_eval->evaluate_host(s.x.data());
        EvaluationPoint p;
        p.wall_seconds = wall;
        p.training_seconds = wall;
        p.samples = s.stats.total_samples;
        p.epoch = double(p.samples) / double(data.train->size());
        p.train_loss = train.loss;
        p.loss = on_curve.loss;
        p.accuracy = on_curve.accuracy;
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

namespace {

bool is_loopback(const std::string& address) {
    if (address.rfind("tcp://", 0) != 0) return true;  // inproc:// and ipc:// stay on this host
    const std::string host = address.substr(6, address.rfind(':') - 6);
    return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]" || host == "::1";
}

// CURVE on the center's endpoint when security.* says so; a warning when a center reachable
// from other hosts runs without it.
void secure_center(const RunConfig& config, const std::string& address, Transport& transport, TransportOptions& options) {
    const SecurityConfig& sec = config.security;
    if (!sec.enabled()) {
        if (!is_loopback(address))
            std::fprintf(stderr,
                         "tether: WARNING: the center binds %s without security: anyone who can reach it can join and "
                         "move x~. Set security.* (tether keygen; see docs/architecture.md#security)\n",
                         address.c_str());
        return;
    }
    if (address.rfind("inproc://", 0) == 0) return;  // one process: nothing to authenticate
    if (!curve_available()) throw ConfigError("security.center_public_key: set, but this libzmq has no CURVE support");
    if (sec.center_secret_key.empty())
        throw ConfigError("security.center_secret_key: the center needs its secret key file (tether keygen writes one)");
    if (sec.authorized_workers.empty())
        throw ConfigError("security.authorized_workers: the center needs the file of allowed worker public keys");
    const std::string secret = read_curve_key(sec.center_secret_key, "security.center_secret_key");
    const std::string expected = read_curve_key(sec.center_public_key, "security.center_public_key");
    if (curve_public_key_of(secret) != expected)
        throw ConfigError("security.center_secret_key: \"" + sec.center_secret_key + "\" is not the secret key of the public key in \"" +
                          sec.center_public_key + "\" (security.center_public_key)");
    transport.require_authentication(read_curve_allowlist(sec.authorized_workers, "security.authorized_workers"));
    options.curve_server_secret = secret;
}

}  // namespace

CenterRun::CenterRun(const RunConfig& config, const TrainTestSplit& data, Transport& transport,
                     const std::string& address, const std::string& directory, bool resume)
    : state_(std::make_unique<State>(config, data, transport, directory, resume)) {
    State& s = *state_;
    const ClusterConfig& k = config.cluster;
    TransportOptions transport_options;
    transport_options.max_message_bytes =
        kHeaderBytes + max_payload_bytes(k.payload_codec(), std::size_t(k.shard_elements)) + 4096;
    // The center never waits on a peer: a reply that cannot be queued at once is dropped and
    // counted (rejections, heartbeat answers) or costs that worker its place (data replies).
    transport_options.send_timeout_ms = 0;
    transport_options.heartbeat_timeout_ms = int(k.worker_timeout_ms);
    secure_center(config, address, transport, transport_options);
    CenterOptions options;
    options.max_message_bytes = transport_options.max_message_bytes;
    options.max_peers = std::size_t(k.max_peers);
    options.elastic = k.elastic;
    // Each worker trains its shard (at most ceil(size / N) samples) for training.epochs.
    options.max_samples_per_worker = std::uint64_t(config.training.epochs) *
                                     ((data.train->size() + std::size_t(k.workers) - 1) / std::size_t(k.workers));
    options.explain_mismatch = mismatch_explainer(s.identity.agreed);
    options.expected_workers = int(k.workers);
    options.fingerprint = s.identity.fingerprint;
    options.shard_elements = std::size_t(k.shard_elements);
    options.payload_codec = k.payload_codec();
    options.reply_codec = k.reply_codec_options();
    options.wire_kinds = config.strategy.rule->wire_kinds();
    options.quorum = k.quorum;
    options.round_timeout_ms = int(k.round_timeout_ms);
    options.worker_timeout_ms = int(k.worker_timeout_ms);
    options.join_timeout_ms = int(k.join_timeout_ms);
    options.samples_per_snapshot = data.train->size() / std::size_t(config.eval.per_epoch);
    options.checkpoint_ms = int(std::min<std::int64_t>(k.checkpoint_seconds * 1000, std::numeric_limits<int>::max()));
    const StrategyContext context{int(k.workers), s.identity.num_parameters};
    s.center = std::make_unique<Center>(transport.bind(address, transport_options),
                                        config.strategy.rule->make_center_rule(context), s.identity.initial, options);
    const std::string checkpoint_path = s.recorder.directory() + "/checkpoint.bin";
    if (resume) {
        const Checkpoint checkpoint = read_checkpoint(checkpoint_path);
        if (checkpoint.fingerprint != s.identity.fingerprint || checkpoint.x.size() != s.identity.num_parameters)
            throw ConfigError(checkpoint_path + ": written by a run with other settings (model, strategy, cluster.workers, "
                              "cluster.shard_elements or data); resume it with the config in its run directory");
        s.center->resume(checkpoint);
        std::printf("resumed from %s at center version %llu (%llu samples)\n", checkpoint_path.c_str(),
                    static_cast<unsigned long long>(checkpoint.version),
                    static_cast<unsigned long long>(checkpoint.total_samples));
    }
    s.center->on_checkpoint = [checkpoint_path](const Checkpoint& c) {
        try {
            write_checkpoint(checkpoint_path, c);
        } catch (const std::exception& e) {
            // A full disk must not end the run: the previous checkpoint stays in place.
            std::fprintf(stderr, "center: checkpoint not written: %s\n", e.what());
        }
    };
    s.eval_backend = make_backend(choose_backend(config.training.eval_device, 1, 0));
    s.curve_eval = std::make_unique<Evaluator>(config, *s.eval_backend, s.curve.data, s.curve.limit);
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
    // t = 0: x~(0), before any worker's update, so the curve starts where training starts (a
    // resumed run goes on from its checkpoint: its curve started in the first run).
    if (!s.resumed) s.queue.emplace_back(Snapshot{s.center->state().x, s.center->state().version, s.center->stats()}, 0.0);
    std::thread evaluator([&s] {
        set_flush_denormals(s.config.training.flush_denormals);
        s.eval_backend->use_on_this_thread();  // training.eval_device may name any GPU
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
    // The test set, once, on the final x~; after the clock stopped, like loading.
    s.eval_backend->use_on_this_thread();
    Evaluator test(s.config, *s.eval_backend, s.data.test, std::size_t(s.config.eval.test_samples));
    const Evaluation final_test = test.evaluate_host(s.center->state().x.data());
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
    extra["refused_handshakes"] = s.transport.refused_handshakes();
    char fingerprint[17];
    std::snprintf(fingerprint, sizeof fingerprint, "%016llx", static_cast<unsigned long long>(s.identity.fingerprint));
    extra["fingerprint"] = fingerprint;  // of the agreed settings (run/agreed_settings.hpp)
    extra["security"] = s.config.security.enabled() ? "curve" : "off";
    extra["device"] = s.config.training.device;  // what the workers were asked to train on
    return s.recorder.finish(wall, wall, stats.total_samples, final_test, test.size(), extra);
}

}  // namespace tether
