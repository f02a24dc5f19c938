// The tether command line: tether run | version (and, as they land, sweep | server | worker).
// Exit codes: 0 success, 2 usage or config error, 1 runtime failure.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <tether/tether.hpp>

#include "backend/backend.hpp"
#include "cli/commands.hpp"
#include "cli/plugins.hpp"
#include "config/known_keys.hpp"
#include "util/errors.hpp"

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "tether: asynchronous elastic-averaging distributed training\n"
    "\n"
    "usage:\n"
    "  tether run CONFIG.json [--set KEY=VALUE]... [--out DIR]   train as the config says\n"
    "  tether sweep SWEEP.json [--out DIR] [--jobs K]           a grid of runs, resumable, with summaries\n"
    "  tether server --config C --bind tcp://*:PORT [--out DIR] the center of a multi-process run\n"
    "  tether worker --config C --connect tcp://HOST:PORT       one worker (under mpirun/srun, rank 0 serves)\n"
    "  tether keygen --out PREFIX                               a CURVE key pair: PREFIX.pub, PREFIX.key\n"
    "  tether keygen --secret                                   a shared secret for a launcher job (TETHER_SECRET)\n"
    "  tether version                                           print version and build\n"
    "  tether config-keys                                       every config key, default and range (JSON lines)\n"
    "  tether COMMAND --help                                    options of one command\n"
    "\n"
    "any command: --plugin LIB.so (repeatable; or TETHER_PLUGINS=LIB.so:...) loads strategies of your own\n"
    "\n"
    "exit codes: 0 success, 2 usage or config error, 3 training diverged (non-finite loss or parameters), 1 any other\n"
    "runtime failure\n"
    "docs: docs/config.md (every config key), docs/strategies.md\n";

int version() {
    std::printf("tether %s (CUDA backend: %s, CUDA devices visible: %d)\n", TETHER_VERSION,
                tether::cuda_built() ? "built" : "not built", tether::cuda_device_count());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // Every tether process exchanges ~1 MB messages: keep freed ones mapped (tether.hpp says why).
    tether::keep_freed_memory_mapped();
    try {
        if (argc < 2) {
            std::fputs(kUsage, stderr);
            return 2;
        }
        const std::string command = argv[1];
        std::vector<std::string> rest(argv + 2, argv + argc);
        tether::cli::load_plugins(tether::cli::take_plugin_arguments(rest));
        if (command == "--help" || command == "-h" || command == "help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (command == "version" || command == "--version") return version();
        if (command == "config-keys") {
            // Every accepted config key as JSON lines: path, type, default, allowed.
            for (const auto& k : tether::known_config_keys())
                std::printf("%s\n", nlohmann::json{{"key", k.path}, {"type", k.type}, {"default", nlohmann::json::parse(k.default_value)}, {"allowed", k.allowed}}.dump().c_str());
            return 0;
        }
        if (command == "run") return tether::cli::run_command(rest);
        if (command == "server") return tether::cli::server_command(rest);
        if (command == "sweep") return tether::cli::sweep_command(rest);
        if (command == "worker") return tether::cli::worker_command(rest);
        if (command == "keygen") return tether::cli::keygen_command(rest);
        std::fprintf(stderr, "tether: unknown command \"%s\"\n\n%s", command.c_str(), kUsage);
        return 2;
    } catch (const tether::ConfigError& e) {
        std::fprintf(stderr, "tether: config error: %s\n", e.what());
        return 2;
    } catch (const po::error& e) {
        std::fprintf(stderr, "tether: %s (see tether --help)\n", e.what());
        return 2;
    } catch (const tether::DivergedError& e) {
        std::fprintf(stderr, "tether: error: %s\n", e.what());
        return tether::kDivergedExit;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tether: error: %s\n", e.what());
        return 1;
    }
}
