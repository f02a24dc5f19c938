// Embedded runs (center + N worker threads over inproc://) and local runs (center here, N
// worker processes over tcp://127.0.0.1 or ipc://), both through the same protocol.
#include <sys/wait.h>
#include <unistd.h>


#include <chrono>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "backend/backend.hpp"
#include "backend/cpu_backend.hpp"
#include "data/load.hpp"
#include "run/center_run.hpp"
#include "run/run.hpp"
#include "run/run_recorder.hpp"
#include "run/worker_run.hpp"
#include "util/errors.hpp"
#include "util/spawn.hpp"

namespace tether {

namespace {

std::string unique_inproc_address() {
    static std::atomic<int> counter{0};
    return "inproc://tether-center-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

nlohmann::json run_embedded(const RunConfig& config, const std::string& directory) {
    const int workers = int(config.cluster.workers);
    const int threads = threads_per_worker(config, workers);
    // OpenBLAS has one process-wide thread count: shared by N workers it would oversubscribe.
    const int blas_threads = workers > 1 ? 1 : threads;
    set_blas_threads(blas_threads, config.training.flush_denormals);
    std::printf("threads: %d worker thread%s with %d thread%s each (OpenBLAS %d), a center thread and an evaluation "
                "thread; denormals %s\n",
                workers, workers == 1 ? "" : "s", threads, threads == 1 ? "" : "s", blas_threads,
                config.training.flush_denormals ? "flushed" : "kept");
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    const std::string address = config.cluster.endpoint.empty() ? unique_inproc_address() : config.cluster.endpoint;
    CenterRun center(config, data, *transport, address, directory);
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
    std::atomic<int> failed{0};
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
                ++failed;
                std::fprintf(stderr, "worker %d failed: %s\n", i, e.what());
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
    summary["failed_workers"] = failed.load();
    write_json_file(directory + "/summary.json", summary);
    return summary;
}

nlohmann::json run_local(const RunConfig& config, const std::string& directory) {
    const int workers = int(config.cluster.workers);
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    const std::string address = config.cluster.endpoint.empty() ? "tcp://127.0.0.1:*" : config.cluster.endpoint;
    CenterRun center(config, data, *transport, address, directory);  // writes directory/config.json
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
            for (pid_t started : children) {  // do not leave the others waiting for a center
                ::kill(started, SIGTERM);
                ::waitpid(started, nullptr, 0);
            }
            throw;
        }
    }
    std::printf("started %d worker processes (logs: %s/worker-*.log)\n", workers, directory.c_str());
    nlohmann::json summary;
    std::exception_ptr failure;
    try {
        summary = center.serve();
    } catch (...) {
        failure = std::current_exception();
    }
    // Children still running once the center is done (a worker counted lost that still trains)
    // get a grace period to say bye, then SIGTERM: nobody would answer them any more.
    nlohmann::json exits = nlohmann::json::array();
    const auto grace_end = std::chrono::steady_clock::now() + std::chrono::seconds(failure ? 0 : 10);
    for (pid_t pid : children) {
        int status = 0;
        while (::waitpid(pid, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() >= grace_end) {
                ::kill(pid, SIGTERM);
                ::waitpid(pid, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        exits.push_back(WIFEXITED(status) ? nlohmann::json(WEXITSTATUS(status))
                                          : nlohmann::json("signal " + std::to_string(WTERMSIG(status))));
    }
    if (failure) std::rethrow_exception(failure);
    summary["worker_exit_status"] = exits;
    write_json_file(directory + "/summary.json", summary);
    return summary;
}

}  // namespace

nlohmann::json run_experiment(const RunConfig& config, const std::string& directory) {
    // Errors the user must fix surface before anything starts, not as a failing worker.
    if (config.training.device == "cuda") make_backend({"cuda", 1, 0});
    if (config.data.source == "synthetic" && config.data.train_samples < config.cluster.workers)
        throw ConfigError("data.train_samples: " + std::to_string(config.data.train_samples) + " samples cannot be split over " +
                          std::to_string(config.cluster.workers) + " workers (cluster.workers); every worker needs at least one");
    if (!config.strategy.rule->uses_center()) return run_sequential(config, directory);
    return config.cluster.mode == "local" ? run_local(config, directory) : run_embedded(config, directory);
}

}  // namespace tether
