// Embedded runs (center + N worker threads over inproc://) and local runs (center here, N
// worker processes over tcp://127.0.0.1 or ipc://), both through the same protocol.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "backend/backend.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/device_choice.hpp"
#include "cluster/launcher.hpp"
#include "cluster/run_keys.hpp"
#include "transport/peer_identity.hpp"
#include "transport/user_sockets.hpp"
#include "data/load.hpp"
#include "record/run_recorder.hpp"
#include "record/run_verdict.hpp"
#include "run/center_run.hpp"
#include "run/run.hpp"
#include "run/worker_run.hpp"
#include "train/batch_split.hpp"
#include "util/child_watch.hpp"
#include "util/errors.hpp"
#include "util/spawn.hpp"

namespace tether {

namespace {

std::string unique_inproc_address() {
    static std::atomic<int> counter{0};
    return "inproc://tether-center-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Secure by default where tether starts the workers itself (cluster/run_keys.hpp): unless the
// user gave keys or asked for none, the run gets keys of its own. `directory`: written there
// and named in the resolved config, which the worker processes of a local run read; "": held
// in memory, for worker threads, and only when an address leaves the process.
RunConfig with_run_keys(const RunConfig& config, const std::vector<std::string>& bind, const std::string& directory) {
    const SecuritySettings& given = config.cluster.security;
    bool user_only = true;  // inproc://, or ipc:// in a folder only this user may enter: nobody else can connect
    for (const std::string& address : bind) user_only = user_only && user_only_address(address);
    if (given.enabled() || given.insecure || user_only) return config;
    RunConfig secured = config;
    if (directory.empty()) {
        secured.cluster.security.keys = fresh_run_keys();
        return secured;
    }
    secured.cluster.security.keys = write_run_keys(directory);
    secured.resolved["security"] = security_block(secured.cluster.security.keys);
    secured.resolved["security"]["insecure"] = false;
    return secured;
}

nlohmann::json run_embedded(const RunConfig& given, const std::string& directory, bool resume) {
    const std::vector<std::string> bind = given.cluster.bind_addresses(unique_inproc_address);
    const RunConfig config = with_run_keys(given, bind, "");
    const int workers = int(config.cluster.workers);
    const int threads = threads_per_worker(config, workers);
    const CpuThreadPlan plan = use_cpu_threads(config, threads, workers);
    std::printf("threads: %d worker thread%s with %s each, a center thread and an evaluation thread; denormals %s\n",
                workers, workers == 1 ? "" : "s", plan.describe().c_str(), config.training.flush_denormals ? "flushed" : "kept");
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    ServerPlan servers;
    servers.bind = bind;
    servers.workers_started_here = true;
    CenterRun center(config, data, *transport, servers, directory, resume);
    nlohmann::json summary;
    std::exception_ptr center_failure;
    std::thread center_thread([&] {
        try {
            summary = center.serve();
        } catch (...) {
            center_failure = std::current_exception();
        }
    });
    std::vector<std::thread> pool;
    std::vector<WorkerFailure> failures;
    std::mutex config_error_mutex;
    std::exception_ptr config_error;
    for (int i = 0; i < workers; ++i)
        pool.emplace_back([&, i] {
            try {
                run_worker(config, data, *transport, center.address(), "worker-" + std::to_string(i), threads);
            } catch (const ConfigError&) {
                // The user's to fix (e.g. training.device cuda without a GPU): stop the run now
                // rather than let the center wait for a worker that will never join.
                std::lock_guard<std::mutex> lock(config_error_mutex);
                if (!config_error) config_error = std::current_exception();
                center.stop();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "worker %d failed: %s\n", i, e.what());
                std::lock_guard<std::mutex> lock(config_error_mutex);
                failures.push_back({i, e.what(), dynamic_cast<const DivergedError*>(&e) != nullptr});
            }
        });
    // Once the center is done nobody answers: a worker counted lost but still running (it
    // stalled past cluster.worker_timeout_ms) would wait reply_timeout_ms. Closing the transport
    // ends its wait at once.
    center_thread.join();
    transport->shutdown();
    for (auto& t : pool) t.join();
    if (config_error) {
        std::filesystem::remove(directory + "/summary.json");  // this run is not complete
        std::rethrow_exception(config_error);
    }
    if (center_failure) std::rethrow_exception(center_failure);
    judge_run(summary, config.cluster, failures);
    write_json_file(directory + "/summary.json", summary);
    return summary;
}

nlohmann::json run_local(const RunConfig& given, const std::string& directory, bool resume) {
    // Every process on this host: by default the servers bind ipc:// sockets in a folder only this
    // user may enter, so no stranger can join and nothing needs encrypting (user_sockets.hpp).
    const UserSocketFolder sockets;
    int next_server = 0;
    const ServerPlan plan{given.cluster.bind_addresses([&] { return sockets.address(next_server++); }), 0, {},
                          /*workers_started_here=*/true};
    const RunConfig config = with_run_keys(given, plan.bind, directory);  // before CenterRun writes config.json
    const int workers = int(config.cluster.workers);
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    CenterRun center(config, data, *transport, plan, directory, resume);  // writes directory/config.json
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string config_path = directory + "/config.json";
    // The children share this host: each takes its share of the cores. A launcher's rank
    // variables (say this whole run is rank 0 of an sbatch job) are not passed on, or every
    // child would think it is the center.
    const std::string threads = "training.threads=" + std::to_string(threads_per_worker(config, workers));
    std::printf("threads: %d worker processes with %d thread%s each; denormals %s\n", workers,
                threads_per_worker(config, workers), threads_per_worker(config, workers) == 1 ? "" : "s",
                config.training.flush_denormals ? "flushed" : "kept");
    std::vector<pid_t> children;
    for (int i = 0; i < workers; ++i) {
        try {
            children.push_back(spawn_logged({self, "worker", "--config", config_path, "--connect", center.address(), "--set", threads},
                                            directory + "/worker-" + std::to_string(i) + ".log", is_launcher_rank_variable));
        } catch (const std::exception&) {
            for (pid_t started : children)  // do not leave the others waiting for a center
                wait_or_kill(started, std::chrono::steady_clock::now());
            throw;
        }
    }
    std::printf("started %d worker processes (logs: %s/worker-*.log)\n", workers, directory.c_str());
    // A child that ends before the center is done: its workers are lost now, naming how it ended
    // (a clean exit said bye already).
    ChildWatch watch(children, [&center, children](std::size_t i, const ChildExit& exit) {
        if (exit.ok()) return;
        center.lose_process(peer_identity_prefix("worker", long(children[i])),
                            "its process " + exit.words() + " (worker-" + std::to_string(i) + ".log)");
    });
    nlohmann::json summary;
    std::exception_ptr failure;
    try {
        summary = center.serve();
    } catch (...) {
        failure = std::current_exception();
    }
    // Children still running once the center is done (a worker counted lost that still trains,
    // or one stopped with SIGSTOP) get a grace period to say bye, then SIGTERM, then SIGKILL:
    // nobody would answer them any more, and the run must end.
    nlohmann::json exits = nlohmann::json::array();
    std::vector<WorkerFailure> failures;
    const auto grace_end = std::chrono::steady_clock::now() + std::chrono::seconds(failure ? 0 : 10);
    const std::vector<ChildExit> ended = watch.finish(grace_end);
    for (std::size_t i = 0; i < children.size(); ++i)
        count_child_exit(int(i), ended[i], directory + "/worker-" + std::to_string(i) + ".log", exits, failures);
    if (failure) std::rethrow_exception(failure);
    summary["worker_exit_status"] = exits;
    judge_run(summary, config.cluster, failures);
    write_json_file(directory + "/summary.json", summary);
    return summary;
}

}  // namespace

nlohmann::json run_experiment(const RunConfig& config, const std::string& directory, bool resume) {
    // Errors the user must fix surface before anything starts, not as a failing worker.
    for (const auto& device : {config.training.device, config.training.eval_device})
        if (device.rfind("cuda", 0) == 0) make_backend(choose_backend(device, 1, 0));
    if (config.data.source == "synthetic" && config.data.train_samples < config.cluster.workers)
        throw ConfigError("data.train_samples: " + std::to_string(config.data.train_samples) + " samples cannot be split over " +
                          std::to_string(config.cluster.workers) + " workers (cluster.workers); every worker needs at least one");
    if (!config.cluster.strategy->uses_center()) {
        if (resume) throw ConfigError("--resume: strategy.name \"sequential\" has no center and writes no checkpoint");
        return run_sequential(config, directory);
    }
    if (config.cluster.servers_on_ranks()) {
        if (config.cluster.mode != "local")
            throw ConfigError("cluster.server_placement: \"ranks\" with cluster.mode \"" + config.cluster.mode + "\"; a "
                              "server on every rank needs a process per rank: set cluster.mode \"local\" (or run the ranks "
                              "with tether worker under a launcher)");
        return run_local_ranks(config, directory, resume);
    }
    return config.cluster.mode == "local" ? run_local(config, directory, resume) : run_embedded(config, directory, resume);
}

}  // namespace tether
