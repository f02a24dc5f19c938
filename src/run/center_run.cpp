#include "run/center_run.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include "backend/float_mode.hpp"
#include "center/server_directory.hpp"
#include "center/center_settings.hpp"
#include "cluster/cluster_settings.hpp"
#include "record/center_figures.hpp"
#include "record/run_recorder.hpp"
#include "record/server_records.hpp"
#include "run/run_records.hpp"
#include "run/snapshot_evaluator.hpp"
#include "run/snapshot_timer.hpp"
#include "util/errors.hpp"

namespace tether {

using Clock = std::chrono::steady_clock;

struct CenterRun::State {
    const RunConfig& config;
    TrainTestSplit data;
    Transport& transport;
    ServerPlan plan;
    std::size_t servers;  // S
    ModelIdentity identity;
    RunRecorder recorder;
    ProgressPrinter progress;
    std::unique_ptr<ServerGroup> group;
    std::unique_ptr<ServerRecords> records;        // checkpoints and exchanges.jsonl
    std::unique_ptr<SnapshotEvaluator> evaluator;  // server 0 only
    Clock::time_point started;
    bool resumed;
    std::mutex snapshot_mutex;  // push(): server 0's thread and the timer's
    double last_pushed_seconds = 0;
    std::pair<std::uint64_t, std::vector<std::uint64_t>> last_snapshot;  // samples, versions
    std::atomic<bool> training{false};   // set once `started` holds the workers' start
    std::unique_ptr<SnapshotTimer> timer;  // eval.every_seconds, server 0 only

    State(const RunConfig& c, const TrainTestSplit& d, Transport& t, ServerPlan p, const std::string& directory, bool resume)
        : config(c), data(d), transport(t), plan(std::move(p)), servers(std::size_t(c.cluster.servers)),
          identity(model_identity(c, *d.train)), recorder(record_settings(c, d), directory, resume),
          // With a budget the run's length is the budget, in passes over the training set.
          progress(c.name,
                   c.cluster.budget_samples > 0 ? double(c.cluster.budget_samples) / double(d.train->size())
                                                : double(c.training.epochs),
                   d.train->size(), curve_set(c, d).name),
          resumed(resume) {}

    bool lead() const { return plan.first == 0; }

    // A snapshot of server 0 (on its thread): x~ from every range served here, taken now.
    PendingSnapshot assemble(Snapshot&& lead_snapshot, bool final) {
        PendingSnapshot p;
        p.x = identity.initial;  // remote ranges are overwritten when the snapshot is scored
        std::copy(lead_snapshot.x.begin(), lead_snapshot.x.end(), p.x.begin());
        std::vector<CenterStats> stats{lead_snapshot.stats};
        for (std::size_t i = 1; i < group->size(); ++i) stats.push_back(group->center(i).stats_now());
        p.versions = group->copy_ranges(p.x.data(), /*skip=*/0);
        p.versions[0] = p.version = lead_snapshot.version;
        p.stats = combine(stats, group->fragments());
        p.wall_seconds = std::chrono::duration<double>(Clock::now() - started).count();
        p.final = final;
        return p;
    }

    // A snapshot of every range served here, from any thread (the timer's), taken now.
    PendingSnapshot take_now() {
        PendingSnapshot p;
        p.x = identity.initial;
        p.versions = group->copy_ranges(p.x.data());
        p.version = p.versions[0];
        p.stats = group->stats_now();
        p.wall_seconds = std::chrono::duration<double>(Clock::now() - started).count();
        return p;
    }

    // Server 0's thread and the timer's both push. Each takes its snapshot first (server 0's
    // thread holds its center's state then, and the timer locks it to copy x~: taking under
    // snapshot_mutex could deadlock), so one taken earlier can arrive later: it is dropped,
    // and the curve stays in order of time with the newer x~ on it.
    void push(PendingSnapshot p) {
        std::lock_guard<std::mutex> lock(snapshot_mutex);
        if (p.wall_seconds < last_pushed_seconds) return;
        last_pushed_seconds = p.wall_seconds;
        last_snapshot = {p.stats.total_samples, p.versions};
        evaluator->push(std::move(p));
    }
};

CenterRun::CenterRun(const RunConfig& config, const TrainTestSplit& data, Transport& transport, ServerPlan plan,
                     const std::string& directory, bool resume)
    : state_(std::make_unique<State>(config, data, transport, std::move(plan), directory, resume)) {
    State& s = *state_;
    const ClusterSettings& k = config.cluster;
    const std::size_t planned = s.plan.on_ranks && s.lead() ? s.servers : s.plan.first + s.plan.bind.size() + s.plan.remote.size();
    if (s.plan.bind.empty() || planned > s.servers || (s.lead() && planned != s.servers))
        throw ConfigError("cluster.servers is " + std::to_string(s.servers) + ", but this process was given " +
                          std::to_string(s.plan.bind.size()) + " server address(es) to bind from server " +
                          std::to_string(s.plan.first) + " and " + std::to_string(s.plan.remote.size()) +
                          " of servers elsewhere; server 0 must know them all");
    // Each worker trains its shard (at most ceil(size / N) samples) for training.epochs, or with
    // a budget or leases, as much of the run as it gets to (all of it, the others idle or lost).
    const std::uint64_t passes = std::uint64_t(config.training.epochs) * data.train->size();
    const std::uint64_t lease_positions = k.budget_samples > 0 ? std::uint64_t(k.budget_samples) : passes;
    const std::uint64_t max_samples_per_worker = std::max(
        std::uint64_t(config.training.epochs) * ((data.train->size() + std::size_t(k.workers) - 1) / std::size_t(k.workers)),
        (k.budget_samples > 0 || k.leases ? lease_positions : 0) +
            2 * std::uint64_t(k.strategy->communication_window()) * std::uint64_t(config.training.batch_size));
    k.check_warmstart(max_samples_per_worker);
    // ... and one window of training.batch_size steps between two exchanges.
    const std::uint64_t samples_per_window =
        std::uint64_t(k.strategy->communication_window()) * std::uint64_t(config.training.batch_size);
    std::shared_ptr<ServerDirectory> server_directory;
    if (s.plan.on_ranks && s.lead())
        server_directory = std::make_shared<ServerDirectory>(s.servers, initial_vector_hash(s.identity.initial.data(), s.identity.initial.size()));
    s.group = make_servers(k, transport, s.plan.bind, s.plan.first, s.identity.servers, s.identity.initial, [&](CenterOptions& o, std::size_t index) {
        if (index == 0) o.directory = server_directory;
        o.membership.max_samples_per_worker = max_samples_per_worker;
        o.membership.max_samples_per_window = samples_per_window;
        o.end.await_final_snapshot = index > 0 && !s.lead();  // server 0 in another process fetches it
        o.snapshots.samples_per_snapshot = index == 0 ? data.train->size() / std::size_t(config.eval.per_epoch) : 0;
        o.snapshots.final_snapshot = false;  // serve() takes it once every server here is done
        if (s.plan.workers_started_here) o.end.center_restart_ms = 0;
        // With a run budget or leases a joiner beyond the places trains until told, not a place's rest.
        o.membership.places_hold_shards = config.cluster.budget_samples == 0 && !config.cluster.leases;  // run/worker_run.cpp: worker id mod cluster.workers picks the shard
        o.membership.lease_positions = lease_positions;
    }, s.plan.inproc_alias);
    s.records = std::make_unique<ServerRecords>(*s.group, s.identity.servers, s.recorder.directory(), resume,
                                                "resume it with the config in its run directory");
    for (const std::string& line : s.records->resumed()) std::printf("%s\n", line.c_str());
    // Wall time counts from when the workers start training, not from when the center began to
    // wait for them (process start-up, loading the data set): as a sequential run's clock
    // starts after loading. A resumed run counts from serve().
    s.group->center(0).on_start = [&s] {
        s.started = Clock::now();
        s.training.store(true, std::memory_order_release);
    };
    if (!s.lead()) return;
    std::unique_ptr<RemoteRanges> remote_ranges;
    if (!s.plan.remote.empty() || (server_directory && s.servers > 1)) {
        std::vector<RemoteServer> remote;
        for (std::size_t i = s.plan.bind.size(); i < s.servers; ++i) {
            const ServerIdentity& id = s.identity.servers[i];
            remote.push_back({id.index, id.range, server_directory ? "" : s.plan.remote[i - s.plan.bind.size()], id.fingerprint});
        }
        // With a server on every rank, where they are is known once every rank has said (the
        // first evaluation, of x~(0), waits for it at most cluster.join_timeout_ms).
        RemoteRanges::AddressSource addresses;
        if (server_directory)
            addresses = [server_directory, timeout = std::chrono::milliseconds(k.join_timeout_ms)] {
                return server_directory->others(timeout);
            };
        // Server 0 talks to the other servers as a worker would (their allowlist holds its key).
        remote_ranges = std::make_unique<RemoteRanges>(transport, std::move(remote),
                                                       k.worker_transport(server_directory ? "tcp://" : s.plan.remote.front()),
                                                       std::size_t(k.chunk_elements), int(k.join_timeout_ms),
                                                       s.group->center(0).tokens(), std::move(addresses));
    }
    s.evaluator = std::make_unique<SnapshotEvaluator>(config, data, s.recorder, s.progress, std::move(remote_ranges));
    s.group->center(0).on_snapshot = [&s](Snapshot&& snapshot) { s.push(s.assemble(std::move(snapshot), false)); };
    // At most one of the timer's snapshots waits: none is taken while any snapshot waits.
    s.timer = std::make_unique<SnapshotTimer>(
        config.eval.every_seconds,
        [&s] { return s.training.load(std::memory_order_acquire) && s.evaluator->waiting() == 0; },
        [&s] { s.push(s.take_now()); });
}

CenterRun::~CenterRun() = default;

const ModelIdentity& CenterRun::identity() const { return state_->identity; }

std::string CenterRun::address() const { return state_->group->address(); }

void CenterRun::stop() { state_->group->stop(); }

void CenterRun::lose_process(const std::string& peer_prefix, const std::string& why) {
    state_->group->lose_process(peer_prefix, why);
}

nlohmann::json CenterRun::serve() {
    State& s = *state_;
    std::printf("tether %s: %s, strategy %s, %lld workers, %s at %s -> %s\n", s.config.name.c_str(),
                s.identity.description.c_str(), s.config.cluster.strategy->describe().dump().c_str(),
                static_cast<long long>(s.config.cluster.workers),
                s.servers == 1 ? "center"
                : s.plan.bind.size() == 1
                    ? ("server " + std::to_string(s.plan.first) + " of " + std::to_string(s.servers)).c_str()
                    : (std::to_string(s.servers) + " servers").c_str(),
                address().c_str(), s.recorder.directory().c_str());
    std::fflush(stdout);
    // This is the lead server's thread in every mode (backend/float_mode.hpp).
    set_flush_denormals(s.config.training.flush_denormals);
    s.started = Clock::now();
    if (s.evaluator) {
        // t = 0: x~(0), before any worker's update, so the curve starts where training starts
        // (a resumed run goes on from its checkpoint: its curve started in the first run).
        if (!s.resumed) s.evaluator->push({s.identity.initial, 0, {}, s.group->stats_now(), 0.0, false, true});
        s.evaluator->start();
        s.timer->start();
        Center* lead = &s.group->center(0);
        s.progress.start([lead] { return LiveStatus{lead->live_samples(), lead->live_version()}; });
    }
    std::exception_ptr failure;
    try {
        const bool flush = s.config.training.flush_denormals;
        s.group->serve([flush] { set_flush_denormals(flush); });
    } catch (...) {
        failure = std::current_exception();
    }
    const double wall = std::chrono::duration<double>(Clock::now() - s.started).count();
    if (s.timer) s.timer->stop();  // before the final snapshot, which is pushed last
    std::vector<float> final_x;
    if (s.evaluator) {
        // The final x~, once every server here is done; evaluated unless nothing changed since
        // the last snapshot (ranges served elsewhere are fetched as their servers finish).
        PendingSnapshot last = s.assemble(Snapshot{s.group->center(0).state().x, s.group->center(0).state().version,
                                                   s.group->center(0).stats()},
                                          true);
        last.record = !failure && (!s.plan.remote.empty() || std::make_pair(last.stats.total_samples, last.versions) != s.last_snapshot);
        if (!failure) s.evaluator->push(std::move(last));
        try {
            final_x = s.evaluator->finish();
            if (const RemoteRanges* remote = s.evaluator->remote(); remote && !failure)
                write_final_ranges(s.recorder.directory(), *remote, final_x.data());
        } catch (...) {
            if (!failure) failure = std::current_exception();
        }
        s.progress.stop();
    }
    s.records->flush();
    if (failure) std::rethrow_exception(failure);
    const CenterStats stats = s.group->stats();
    nlohmann::json extra = center_summary(*s.group, s.config.cluster, s.identity.servers[s.plan.first].fingerprint,
                                          s.transport.refused_handshakes());
    extra["model"] = s.identity.description;
    extra["parameters"] = s.identity.num_parameters;
    // Evaluations that could not keep up: snapshots replaced by a newer one before scoring.
    if (s.evaluator) extra["evaluations_skipped"] = s.evaluator->skipped();
    extra["device"] = s.config.training.device;  // what the workers were asked to train on
    if (const auto age = s.records->checkpoint_age()) extra["rolled_back_seconds"] = *age;  // with rolled_back_updates
    if (!s.lead()) {  // server K > 0 alone: its own traffic and versions; server 0 evaluates
        extra["server"] = s.plan.first;
        extra["samples"] = stats.total_samples;
        extra["wall_seconds"] = wall;
        // Server 0 may lack this server's final range: then the run's x~ is incomplete (run_verdict.hpp).
        if (const std::string missing = s.group->final_missing(); !missing.empty()) extra["final_range_missing"] = missing;
        write_json_file(s.recorder.directory() + "/summary.json", extra);
        return extra;
    }
    // The plan: the budget, or the workers' shards, which partition the training set, each
    // passed training.epochs times; run_verdict.hpp compares the samples trained with it.
    const auto budget = std::uint64_t(s.config.cluster.budget_samples);
    extra["samples_planned"] = budget > 0 ? budget : std::uint64_t(s.data.train->size()) * std::uint64_t(s.config.training.epochs);
    if (budget > 0) extra["budget_samples"] = budget;
    // The test set, once, on the final x~; after the clock stopped, like loading.
    s.evaluator->backend().use_on_this_thread();
    Evaluator test(s.config, s.evaluator->backend(), s.data.test, std::size_t(s.config.eval.test_samples));
    const Evaluation final_test = test.evaluate_host(final_x.data());
    return s.recorder.finish(wall, wall, stats.total_samples, FinalTest{final_test.accuracy, final_test.loss, test.size()},
                             extra);
}

}  // namespace tether
