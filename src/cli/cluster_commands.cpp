// tether server / tether worker: one process per role, by hand or under a launcher.
#include <boost/program_options.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "backend/cpu_backend.hpp"
#include "cli/commands.hpp"
#include "cluster/cluster_settings.hpp"
#include "cluster/run_keys.hpp"
#include "config/config.hpp"
#include "data/load.hpp"
#include "record/run_recorder.hpp"
#include "record/run_verdict.hpp"
#include "run/center_run.hpp"
#include "run/run.hpp"
#include "run/worker_run.hpp"
#include "train/batch_split.hpp"
#include "transport/peer_identity.hpp"
#include "util/errors.hpp"

namespace po = boost::program_options;

namespace tether::cli {
namespace {

struct Common {
    std::string config_path, address, out, resume, server, other_servers;
    std::vector<std::string> overrides;
};

bool parse(const std::vector<std::string>& arguments, const char* usage, const char* address_flag,
           const char* address_help, Common& c) {
    po::options_description options(usage);
    options.add_options()("help,h", "show this help")("config", po::value(&c.config_path), "the config file")(
        address_flag, po::value(&c.address), address_help)("set", po::value(&c.overrides)->composing(),
                                                           "override a config key (repeatable)");
    options.add_options()("out", po::value(&c.out), std::string(address_flag) == "bind"
                                                        ? "run directory (default runs/<name>-<timestamp>/)"
                                                        : "run directory when this process is rank 0 under a launcher");
    if (std::string(address_flag) == "bind")
        options.add_options()("resume", po::value(&c.resume),
                              "go on from RUN_DIR/checkpoint.bin (config from RUN_DIR/config.json unless --config)")(
            "server", po::value(&c.server),
            "K/S: run server K of the S = cluster.servers servers of x~ (its server range) only; one --bind address")(
            "shard", po::value<std::string>(), "the old name of --server (deprecated)")(
            "other-servers", po::value(&c.other_servers),
            "with --server 0/S: the addresses of servers 1..S-1, in order, separated by ',' (server 0 fetches their "
            "ranges of x~ to evaluate it)");
    po::variables_map vm;
    po::store(po::command_line_parser(arguments).options(options).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << options << "\n";
        return false;
    }
    if (vm.count("shard")) {
        if (vm.count("server")) throw po::error("--shard is the old name of --server; give only --server");
        std::fprintf(stderr, "tether server: --shard is deprecated; it is now --server\n");
        c.server = vm["shard"].as<std::string>();
    }
    if (!c.resume.empty()) {
        if (c.config_path.empty()) c.config_path = c.resume + "/config.json";
        if (c.out.empty()) c.out = c.resume;
    }
    if (c.config_path.empty()) throw po::error(std::string(usage) + ": --config is required");
    if (c.address.empty()) throw po::error(std::string(usage) + ": --" + address_flag + " is required");
    return true;
}

// tcp://host:port -> tcp://*:port, for rank 0 of a launcher binding the address the others use.
std::string bind_address_for(const std::string& connect) {
    const auto scheme = connect.find("://");
    const auto colon = connect.rfind(':');
    if (connect.rfind("tcp://", 0) != 0 || colon == std::string::npos || colon <= scheme)
        throw ConfigError("--connect " + connect + ": under a launcher rank 0 binds this address; expected tcp://HOST:PORT");
    return "tcp://*" + connect.substr(colon);
}

// The servers this process runs: all of cluster.servers (one --bind address each), or server K
// of S with --server K/S.
ServerPlan plan_from(const Common& c, const RunConfig& config) {
    ServerPlan plan;
    plan.bind = split_addresses(c.address, "--bind");
    const std::size_t servers = std::size_t(config.cluster.servers);
    if (c.server.empty()) {
        if (!c.other_servers.empty()) throw ConfigError("--other-servers: only with --server 0/S (server 0 run alone)");
        if (plan.bind.size() != servers)
            throw ConfigError("--bind " + c.address + ": cluster.servers is " + std::to_string(servers) + "; give one address per "
                              "server (all in this process), separated by ',', or run each with --server K/" + std::to_string(servers));
        return plan;
    }
    std::size_t k = 0, s = 0;
    char slash = 0;
    std::istringstream in(c.server);
    if (!(in >> k >> slash >> s) || slash != '/' || !in.eof() || s == 0 || k >= s)
        throw ConfigError("--server " + c.server + ": expected K/S with 0 <= K < S, e.g. --server 1/3");
    if (s != servers)
        throw ConfigError("--server " + c.server + ": cluster.servers is " + std::to_string(servers) + " in " + c.config_path +
                          "; use --server K/" + std::to_string(servers) + " or --set cluster.servers=" + std::to_string(s));
    if (plan.bind.size() != 1) throw ConfigError("--bind " + c.address + ": --server runs one server; give one address");
    plan.first = k;
    if (k > 0) {
        if (!c.other_servers.empty())
            throw ConfigError("--other-servers: only server 0 (--server 0/S) fetches the other servers' ranges");
        return plan;
    }
    if (s > 1) {
        if (c.other_servers.empty())
            throw ConfigError("--server 0/" + std::to_string(s) + ": server 0 evaluates x~ and needs the other servers' "
                              "addresses: --other-servers A1,...,A" + std::to_string(s - 1));
        plan.remote = split_addresses(c.other_servers, "--other-servers");
        if (plan.remote.size() != s - 1)
            throw ConfigError("--other-servers " + c.other_servers + ": " + std::to_string(plan.remote.size()) + " address(es); servers 1.." +
                              std::to_string(s - 1) + " are " + std::to_string(s - 1));
    }
    return plan;
}

RunConfig load_distributed(const Common& c) {
    RunConfig config = load_config(c.config_path, c.overrides);
    if (!config.cluster.strategy->uses_center())
        throw ConfigError(c.config_path + ": strategy.name \"sequential\" has no center; pick a distributed strategy");
    return config;
}

// A rank of a launcher job (mpirun, srun): what its shared secret depends on. The launcher
// entry (cluster/launcher.hpp, as it lands) gives the rank and job id; until then the
// variables below.
LauncherKeyRequest launcher_key_request(const RunConfig& config, int rank) {
    LauncherKeyRequest r;
    r.rank = rank;
    for (const char* name : {"SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"})
        if (const char* value = std::getenv(name); value && *value) {
            r.job_id = value;
            break;
        }
    r.timeout_ms = int(config.cluster.join_timeout_ms);
    return r;
}

// Secure by default under a launcher: every rank derives the run's keys from one shared secret
// (cluster/run_keys.hpp), unless the config gives keys or asks for none.
void secure_launcher_rank(RunConfig& config, const LauncherKeyRequest& request) {
    const SecuritySettings& given = config.cluster.security;
    if (given.enabled() || given.insecure) return;
    config.cluster.security = launcher_keys(request);  // never written to config.json: the keys stay in memory
}

// `launcher`: this is rank 0 of a launcher job.
int serve(const Common& c, bool launcher = false) {
    RunConfig config = load_distributed(c);
    const LauncherKeyRequest request = launcher_key_request(config, 0);
    if (launcher) secure_launcher_rank(config, request);
    const ServerPlan plan = plan_from(c, config);
    // Servers 1..S-1 give x~ only to joined workers and to peers holding an allowed key.
    if (!plan.remote.empty() && !config.cluster.security.enabled() && !config.cluster.security.insecure)
        throw ConfigError("--other-servers: servers 1.." + std::to_string(plan.remote.size()) + " give their ranges of x~ "
                          "only to peers holding an allowed CURVE key; give security.* keys (tether keygen) to every "
                          "server and worker, or set security.insecure true");
    set_blas_threads(1, config.training.flush_denormals);
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    const std::string directory = c.out.empty() ? default_run_directory(config.name) : c.out;
    CenterRun center(config, data, *transport, plan, directory, !c.resume.empty());
    std::printf("center listening at %s, waiting for %lld workers\n", center.address().c_str(),
                static_cast<long long>(config.cluster.workers));
    std::fflush(stdout);
    nlohmann::json summary = center.serve();
    if (launcher) remove_launcher_secret(request);
    judge_run(summary, config.cluster, {});
    write_json_file(directory + "/summary.json", summary);
    if (plan.first > 0) {
        std::printf("server %zu of %lld done: version %llu, %d workers lost, %llu messages rejected; run directory %s\n",
                    plan.first, static_cast<long long>(config.cluster.servers),
                    static_cast<unsigned long long>(summary.value("center_version", 0ull)), summary.value("workers_lost", 0),
                    static_cast<unsigned long long>(summary.value("rejected_messages", 0ull)), directory.c_str());
        return report_verdict(summary);
    }
    std::printf("final %s; %d workers lost, %llu messages rejected; run directory %s\n",
                accuracy_line(summary).c_str(), summary.value("workers_lost", 0), static_cast<unsigned long long>(summary.value("rejected_messages", 0ull)),
                directory.c_str());
    return report_verdict(summary);
}

}  // namespace

int server_command(const std::vector<std::string>& arguments) {
    Common c;
    if (!parse(arguments,
               "tether server --config C --bind tcp://*:PORT[,...] [--server K/S [--other-servers A1,...]] [--out DIR] "
               "[--resume RUN_DIR] [--set K=V]...",
               "bind", "address to bind, e.g. tcp://*:5555 (tcp://127.0.0.1:* lets the OS pick a port); one per server", c))
        return 0;
    return serve(c);
}

int worker_command(const std::vector<std::string>& arguments) {
    Common c;
    if (!parse(arguments, "tether worker --config C --connect tcp://HOST:PORT[,...] [--set K=V]...", "connect",
               "the center's address (with cluster.servers > 1: every server's, server 0 first, separated by ','); "
               "under mpirun/srun rank 0 binds it and serves", c))
        return 0;
    if (const auto rank = launcher_rank(); rank && *rank == 0) {
        Common server = c;
        server.address.clear();  // every server's port, all served by rank 0
        for (const std::string& a : split_addresses(c.address, "--connect"))
            server.address += (server.address.empty() ? "" : ",") + bind_address_for(a);
        return serve(server, /*launcher=*/true);
    }
    RunConfig config = load_distributed(c);
    if (const auto rank = launcher_rank()) secure_launcher_rank(config, launcher_key_request(config, *rank));
    const int threads = threads_per_worker(config, 1);
    const CpuThreadPlan plan = use_cpu_threads(config, threads, 1);
    std::printf("worker: CPU %s; denormals %s\n", plan.describe().c_str(),
                config.training.flush_denormals ? "flushed" : "kept");
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    const WorkerResult r = run_worker(config, data, *transport, c.address, unique_peer_identity("worker"), threads);
    std::printf("worker %u done: %zu steps, %zu samples, %zu exchanges, %.1f s waiting on the center\n", r.worker_id,
                r.steps, r.samples, r.exchanges, r.seconds_waiting);
    return 0;
}

}  // namespace tether::cli
