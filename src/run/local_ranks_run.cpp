// A local run with a server on every rank (cluster.mode "local", cluster.server_placement
// "ranks"): `tether run` starts N `tether worker` processes as the ranks of a launcher would
// (RANK, WORLD_SIZE, rank 0 at 127.0.0.1:P, each rank's server at 127.0.0.1:P + k, one fresh
// secret for their CURVE keys), shows rank 0's progress, and judges the run from rank 0's
// summary and every rank's exit. It hosts no server itself.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cluster/launcher.hpp"
#include "record/run_recorder.hpp"
#include "record/run_verdict.hpp"
#include "run/run.hpp"
#include "transport/curve_keys.hpp"
#include "transport/tcp_probe.hpp"
#include "util/errors.hpp"
#include "util/spawn.hpp"

namespace tether {

namespace {

// What this process's own environment must not pass on to the ranks: a launcher's rank
// variables and where its center is (the ranks get their own below).
bool not_for_ranks(const std::string& entry) {
    for (const char* name : {"TETHER_CENTER=", "TETHER_PORT=", "TETHER_HOST=", "TETHER_SECRET=", "MASTER_ADDR=", "MASTER_PORT="})
        if (entry.rfind(name, 0) == 0) return true;
    return is_launcher_rank_variable(entry);
}

// Copies what rank 0's log gained since `offset` to stdout: its progress is the run's.
void show_new_output(const std::string& log, std::streamoff& offset) {
    std::ifstream in(log, std::ios::binary);
    if (!in) return;
    in.seekg(offset);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset += std::streamoff(text.size());
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

}  // namespace

nlohmann::json run_local_ranks(const RunConfig& config, const std::string& directory, bool resume) {
    const int ranks = int(config.cluster.workers);
    std::filesystem::create_directories(directory);
    const std::string config_path = directory + "/config.json";
    if (!resume) write_json_file(config_path, config.resolved);  // what every rank reads (rank 0 writes it again)
    const int port = free_loopback_ports(ranks);
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string threads = "training.threads=" + std::to_string(threads_per_worker(config, ranks));
    const std::string secret = generate_secret();  // this run's: its ranks' CURVE keys, in no file
    std::vector<pid_t> children;
    std::vector<std::string> logs;
    for (int r = 0; r < ranks; ++r) {
        std::vector<std::string> args{self, "worker", "--set", threads};
        if (resume)
            args.insert(args.end(), {"--resume", directory});
        else
            args.insert(args.end(), {"--config", config_path, "--out", directory});
        const std::vector<std::string> environment{
            "RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(ranks), "LOCAL_RANK=" + std::to_string(r),
            "LOCAL_WORLD_SIZE=" + std::to_string(ranks), "TETHER_CENTER=127.0.0.1:" + std::to_string(port),
            "TETHER_HOST=127.0.0.1", "TETHER_SECRET=" + secret};
        logs.push_back(directory + "/rank-" + std::to_string(r) + ".log");
        try {
            children.push_back(spawn_logged(args, logs.back(), not_for_ranks, environment));
        } catch (const std::exception&) {
            for (pid_t started : children) wait_or_kill(started, std::chrono::steady_clock::now());
            throw;
        }
    }
    std::printf("started %d ranks, each a server of x~ and a worker, at 127.0.0.1:%d..%d (logs: %s/rank-*.log); rank 0:\n",
                ranks, port, port + ranks - 1, directory.c_str());
    std::fflush(stdout);
    // Rank 0 ends the run (its server waits for every worker, then for the others' final ranges).
    int status = 0;
    std::streamoff shown = 0;
    while (::waitpid(children[0], &status, WNOHANG) == 0) {
        show_new_output(logs[0], shown);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    show_new_output(logs[0], shown);
    nlohmann::json exits = nlohmann::json::array();
    std::vector<WorkerFailure> failures;
    const auto grace_end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int r = 0; r < ranks; ++r)
        count_child_exit(r, r == 0 ? ChildExit::of(status) : wait_or_kill(children[std::size_t(r)], grace_end),
                         logs[std::size_t(r)], exits, failures);
    const std::string summary_path = directory + "/summary.json";
    if (!std::filesystem::exists(summary_path))
        throw std::runtime_error("rank 0 ended (" + exits[0].dump() + ") without writing " + summary_path + "; see " + logs[0]);
    std::ifstream in(summary_path);
    nlohmann::json summary = nlohmann::json::parse(in);
    summary["worker_exit_status"] = exits;
    judge_run(summary, config.cluster, failures);
    write_json_file(summary_path, summary);
    return summary;
}

}  // namespace tether
