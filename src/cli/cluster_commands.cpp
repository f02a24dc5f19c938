// tether server / tether worker: one process per role, by hand or under a launcher (torchrun,
// srun, mpirun: cluster/launcher.hpp), where rank 0 hosts the center and trains too.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "backend/cpu_backend.hpp"
#include "cli/commands.hpp"
#include "cluster/cluster_settings.hpp"
#include "cluster/launcher.hpp"
#include "center/server_directory.hpp"
#include "cluster/run_keys.hpp"
#include "config/config.hpp"
#include "data/load.hpp"
#include "record/run_recorder.hpp"
#include "record/server_records.hpp"
#include "record/run_verdict.hpp"
#include "run/center_run.hpp"
#include "run/run.hpp"
#include "run/worker_run.hpp"
#include "train/batch_split.hpp"
#include "transport/peer_identity.hpp"
#include "util/errors.hpp"
#include "worker/directory_request.hpp"

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
    if (std::string(address_flag) != "bind")
        options.add_options()("resume", po::value(&c.resume),
                              "with cluster.server_placement \"ranks\": this rank's server goes on from its checkpoint in "
                              "RUN_DIR (rank 0's run directory; rank k > 0: RUN_DIR/server-k), config from "
                              "RUN_DIR/config.json unless --config");
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
    if (!c.out.empty()) check_out_directory(c.out);
    // A worker under a launcher takes the center's address from its environment.
    if (c.address.empty() && std::string(address_flag) == "bind")
        throw po::error(std::string(usage) + ": --" + address_flag + " is required");
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

// Rank 0's own worker joins its center over the loopback: tcp://*:PORT (or whatever host the
// servers bound) -> tcp://127.0.0.1:PORT, for every server.
std::string loopback(const std::string& addresses) {
    std::string out;
    for (const std::string& a : split_addresses(addresses, "the center's address"))
        out += (out.empty() ? "tcp://127.0.0.1" : ",tcp://127.0.0.1") + a.substr(a.rfind(':'));
    return out;
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

RunConfig load_distributed(const Common& c, const Launcher* launcher = nullptr) {
    RunConfig config = load_config(c.config_path, c.overrides, launcher);
    if (!config.cluster.strategy->uses_center())
        throw ConfigError(c.config_path + ": strategy.name \"sequential\" has no center; pick a distributed strategy");
    return config;
}

// A rank of a launcher job: what its shared secret depends on, from the one reader of the
// launcher's variables (cluster/launcher.hpp).
LauncherKeyRequest launcher_key_request(const RunConfig& config, const Launcher& launcher) {
    return {launcher.rank, launcher.job_id, "", int(config.cluster.join_timeout_ms)};
}

// Secure by default under a launcher: every rank derives the run's keys from one shared secret
// (cluster/run_keys.hpp), unless the config gives keys or asks for none.
void secure_launcher_rank(RunConfig& config, const LauncherKeyRequest& request) {
    const SecuritySettings& given = config.cluster.security;
    if (given.enabled() || given.insecure) return;
    config.cluster.security.keys = launcher_keys(request);  // never written to config.json: the keys stay in memory
}

// Rank 0 removes the secret it wrote once its center is done, however it ended.
struct LauncherSecretRemoval {
    LauncherKeyRequest request;
    ~LauncherSecretRemoval() { remove_launcher_secret(request); }
};

// A worker process's share of its host's cores: under a launcher, cores / the ranks on this host.
int worker_threads(const RunConfig& config, const Launcher* launcher) {
    return threads_per_worker(config, launcher ? launcher->local_world_size : 1);
}

void print_worker_done(const WorkerResult& r) {
    std::printf("worker %u done: %zu steps, %zu samples, %zu exchanges, %.1f s waiting on the center", r.worker_id, r.steps,
                r.samples, r.exchanges, r.seconds_waiting);
    if (r.last_window > 0)  // dynamic local updates
        std::printf("; windows sized by the center: %d to %d local steps, %d at the end (%zu changes)", r.smallest_window,
                    r.largest_window, r.last_window, r.window_changes);
    std::printf("\n");
}

// With a server on every rank: every server's address, once server 0 knows them all, joined
// by ','; this rank's own as `own` (its inproc alias: its exchanges with it stay in this
// process), and server 0 where this rank reached it.
std::string rank_server_addresses(const RunConfig& config, Transport& transport, const Launcher& l,
                                  const ModelIdentity& identity, const std::string& own) {
    const std::string server0 = l.center_address(1);
    l.wait_for_center(server0);
    const DirectoryEntry entry{std::size_t(l.rank), l.rank_server_address(),
                               initial_vector_hash(identity.initial.data(), identity.initial.size())};
    return join_directory(transport, server0, config.cluster.worker_transport(server0), identity.fingerprint(), entry, own,
                          int(config.cluster.join_timeout_ms));
}

// Whether a launcher's restarted attempt (torchrun --max-restarts, srun --requeue) resumes its
// servers: where `directory` (the rank's --out) holds every checkpoint they go on from. Said
// either way, as the Python ranks say it.
bool resumes_attempt(const Launcher* launcher, const Common& c, const ServerPlan& plan, const std::string& directory,
                     std::size_t servers) {
    if (!c.resume.empty() || !launcher || launcher->attempt == 0 || c.out.empty()) return false;
    for (std::size_t k = plan.first; k < plan.first + plan.bind.size(); ++k)
        if (!resumable_checkpoint(directory, servers, k)) {
            std::printf("rank %d, attempt %d: no checkpoint in %s yet; starting from x~(0)\n", launcher->rank,
                        launcher->attempt, directory.c_str());
            return false;
        }
    std::printf("rank %d, attempt %d: resuming from %s\n", launcher->rank, launcher->attempt, directory.c_str());
    return true;
}

// The servers of the plan (`given`, else from the command line); with a rank of a `launcher`
// that trains (rank 0 with cluster.center_trains, every rank with servers on the ranks), also a
// worker on a thread of its own, joining over the loopback (its own server, on the ranks, in-process).
int serve(const Common& c, const RunConfig& config, const Launcher* launcher = nullptr, const ServerPlan* given = nullptr) {
    const ServerPlan plan = given ? *given : plan_from(c, config);
    const bool trains = launcher && config.cluster.center_trains;
    const int threads = worker_threads(config, launcher);
    if (trains)
        std::printf("worker (rank %d, beside %s): CPU %s; denormals %s\n", launcher->rank,
                    plan.on_ranks ? "its server" : "the center", use_cpu_threads(config, threads, 1).describe().c_str(),
                    config.training.flush_denormals ? "flushed" : "kept");
    else
        set_blas_threads(1, config.training.flush_denormals);
    // Servers 1..S-1 give x~ only to joined workers and to peers holding an allowed key.
    if (!plan.remote.empty() && !config.cluster.security.enabled() && !config.cluster.security.insecure)
        throw ConfigError("--other-servers: servers 1.." + std::to_string(plan.remote.size()) + " give their ranges of x~ "
                          "only to peers holding an allowed CURVE key; give security.* keys (tether keygen) to every "
                          "server and worker, or set security.insecure true");
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    std::string directory = c.out.empty() ? default_run_directory(config.name) : c.out;
    if (plan.on_ranks && plan.first > 0) {  // server K's records, inside rank 0's run directory where they share one
        directory = c.out.empty() ? default_run_directory(config.name + "-server-" + std::to_string(plan.first))
                                  : rank_server_directory(c.out, plan.first);
    }
    const bool resume = !c.resume.empty() || resumes_attempt(launcher, c, plan, directory, std::size_t(config.cluster.servers));
    CenterRun center(config, data, *transport, plan, directory, resume);
    if (plan.on_ranks)
        std::printf("server %zu of %lld listening at %s, waiting for %lld workers\n", plan.first,
                    static_cast<long long>(config.cluster.servers), center.address().c_str(),
                    static_cast<long long>(config.cluster.workers));
    else
        std::printf("center listening at %s, waiting for %lld workers\n", center.address().c_str(),
                    static_cast<long long>(config.cluster.workers));
    std::fflush(stdout);
    std::vector<WorkerFailure> failures;
    std::exception_ptr config_error;
    std::thread worker;
    if (trains)
        worker = std::thread([&] {
            try {
                const std::string servers = plan.on_ranks ? rank_server_addresses(config, *transport, *launcher, center.identity(), plan.inproc_alias)
                                                          : loopback(center.address());
                print_worker_done(run_worker(config, data, *transport, servers, unique_peer_identity("worker"), threads, launcher));
            } catch (const ConfigError&) {
                config_error = std::current_exception();  // the user's to fix: stop now, not after a timeout
                center.stop();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "worker (rank %d) failed: %s\n", launcher->rank, e.what());
                failures.push_back({launcher->rank, e.what(), dynamic_cast<const DivergedError*>(&e) != nullptr});
            }
        });
    // Once the center is done nobody answers: closing the transport ends a wait of rank 0's worker.
    const auto join_worker = [&] {
        if (!worker.joinable()) return;
        transport->shutdown();
        worker.join();
    };
    nlohmann::json summary;
    try {
        summary = center.serve();
    } catch (...) {
        join_worker();
        throw;
    }
    join_worker();
    if (config_error) std::rethrow_exception(config_error);
    judge_run(summary, config.cluster, failures);
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
    return serve(c, load_distributed(c));
}

int worker_command(const std::vector<std::string>& arguments) {
    Common c;
    if (!parse(arguments, "tether worker --config C [--connect tcp://HOST:PORT[,...]] [--out DIR] [--resume RUN_DIR] [--set K=V]...", "connect",
               "the center's address (with cluster.servers > 1: every server's, server 0 first, separated by ','); "
               "under torchrun, srun or mpirun rank 0's, from the launcher's environment unless given here, and rank 0 "
               "binds it and hosts the center", c))
        return 0;
    const std::optional<Launcher> launcher = read_launcher();
    const Launcher* l = launcher ? &*launcher : nullptr;
    if (!l && c.address.empty())
        throw po::error("tether worker: --connect is required outside a launcher (torchrun, srun, mpirun)");
    RunConfig config = load_distributed(c, l);
    const int servers = int(config.cluster.servers);
    if (l)
        std::printf("%s: rank %d of %d (%s), local rank %d of %d; %lld workers (%s)\n", l->name.c_str(), l->rank,
                    l->world_size, l->variables.c_str(), l->local_rank, l->local_world_size,
                    static_cast<long long>(config.cluster.workers),
                    config.cluster.center_trains ? "rank 0 trains too" : "rank 0 hosts the center only");
    const LauncherKeyRequest request = l ? launcher_key_request(config, *l) : LauncherKeyRequest{};
    if (l) secure_launcher_rank(config, request);  // before rank 0 binds: its own worker joins with the keys too
    if (!c.resume.empty() && !config.cluster.servers_on_ranks())
        throw ConfigError("--resume " + c.resume + ": a worker resumes nothing; only a rank hosting a server "
                          "(cluster.server_placement \"ranks\") goes on from its checkpoint (tether server --resume for a center)");
    if (config.cluster.servers_on_ranks()) {
        if (!l)
            throw ConfigError("cluster.server_placement \"ranks\": tether worker runs under a launcher (torchrun, srun, "
                              "mpirun) there, every rank hosting one server; none is set (no RANK/WORLD_SIZE, SLURM_PROCID, "
                              "OMPI_COMM_WORLD_RANK, PMI_RANK)");
        if (!c.address.empty())
            throw ConfigError("--connect " + c.address + ": with cluster.server_placement \"ranks\" rank k's server listens "
                              "at its own host, port " + std::to_string(l->port) + " + k, and the ranks learn each other's "
                              "addresses from rank 0; give no --connect");
        std::unique_ptr<LauncherSecretRemoval> removal;
        if (l->rank == 0) removal.reset(new LauncherSecretRemoval{request});
        ServerPlan plan;
        plan.bind = {l->rank_server_bind_address()};
        plan.first = std::size_t(l->rank);
        plan.on_ranks = true;
        plan.inproc_alias = "inproc://tether-rank-" + std::to_string(l->rank);
        return serve(c, config, l, &plan);
    }
    if (l && l->rank == 0) {
        const LauncherSecretRemoval removal{request};
        Common server = c;
        server.address = l->bind_address(servers);
        if (!c.address.empty()) {  // every server's port, all served by rank 0
            server.address.clear();
            for (const std::string& a : split_addresses(c.address, "--connect"))
                server.address += (server.address.empty() ? "" : ",") + bind_address_for(a);
        }
        return serve(server, config, l);
    }
    const std::string address = c.address.empty() ? l->center_address(servers) : c.address;
    if (l) l->wait_for_center(address);  // within seconds, not after the join timeout
    const int threads = worker_threads(config, l);
    const CpuThreadPlan plan = use_cpu_threads(config, threads, 1);
    std::printf("worker: CPU %s; denormals %s\n", plan.describe().c_str(),
                config.training.flush_denormals ? "flushed" : "kept");
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    print_worker_done(run_worker(config, data, *transport, address, unique_peer_identity("worker"), threads, l));
    return 0;
}

}  // namespace tether::cli
