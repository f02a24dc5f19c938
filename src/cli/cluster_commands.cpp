// tether server / tether worker: one process per role, by hand or under a launcher.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>


#include "backend/cpu_backend.hpp"
#include "cli/commands.hpp"
#include "config/config.hpp"
#include "data/load.hpp"
#include "run/center_run.hpp"
#include "run/run.hpp"
#include "run/run_recorder.hpp"
#include "run/run_verdict.hpp"
#include "run/worker_run.hpp"
#include "train/batch_split.hpp"
#include "transport/peer_identity.hpp"
#include "util/errors.hpp"

namespace po = boost::program_options;

namespace tether::cli {
namespace {

struct Common {
    std::string config_path, address, out, resume;
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
                              "go on from RUN_DIR/checkpoint.bin (config from RUN_DIR/config.json unless --config)");
    po::variables_map vm;
    po::store(po::command_line_parser(arguments).options(options).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << options << "\n";
        return false;
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

int serve(const Common& c) {
    const RunConfig config = load_config(c.config_path, c.overrides);
    if (!config.strategy.rule->uses_center())
        throw ConfigError(c.config_path + ": strategy.name \"sequential\" has no center; pick a distributed strategy");
    set_blas_threads(1, config.training.flush_denormals);
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    const std::string directory = c.out.empty() ? default_run_directory(config.name) : c.out;
    CenterRun center(config, data, *transport, c.address, directory, !c.resume.empty());
    std::printf("center listening at %s, waiting for %lld workers\n", center.address().c_str(),
                static_cast<long long>(config.cluster.workers));
    std::fflush(stdout);
    nlohmann::json summary = center.serve();
    judge_run(summary, config.cluster, {});
    write_json_file(directory + "/summary.json", summary);
    std::printf("final %s; %d workers lost, %llu messages rejected; run directory %s\n",
                accuracy_line(summary).c_str(), summary.value("workers_lost", 0), static_cast<unsigned long long>(summary.value("rejected_messages", 0ull)),
                directory.c_str());
    return report_verdict(summary);
}

}  // namespace

int server_command(const std::vector<std::string>& arguments) {
    Common c;
    if (!parse(arguments, "tether server --config C --bind tcp://*:PORT [--out DIR] [--resume RUN_DIR] [--set K=V]...", "bind",
               "address to bind, e.g. tcp://*:5555 (tcp://127.0.0.1:* lets the OS pick a port)", c))
        return 0;
    return serve(c);
}

int worker_command(const std::vector<std::string>& arguments) {
    Common c;
    if (!parse(arguments, "tether worker --config C --connect tcp://HOST:PORT [--set K=V]...", "connect",
               "the center's address; under mpirun/srun rank 0 binds it and serves", c))
        return 0;
    if (const auto rank = launcher_rank(); rank && *rank == 0) {
        Common server = c;
        server.address = bind_address_for(c.address);
        return serve(server);
    }
    const RunConfig config = load_config(c.config_path, c.overrides);
    if (!config.strategy.rule->uses_center())
        throw ConfigError(c.config_path + ": strategy.name \"sequential\" has no center; pick a distributed strategy");
    const int threads = threads_per_worker(config, 1);
    use_cpu_threads(threads, int(config.training.batch_size), 1, config.training.flush_denormals);
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    auto transport = make_zmq_transport();
    const WorkerResult r = run_worker(config, data, *transport, c.address, unique_peer_identity("worker"), threads);
    std::printf("worker %u done: %zu steps, %zu samples, %zu exchanges, %.1f s waiting on the center\n", r.worker_id,
                r.steps, r.samples, r.exchanges, r.seconds_waiting);
    return 0;
}

}  // namespace tether::cli
