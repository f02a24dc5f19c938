#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "config/config.hpp"
#include "record/run_recorder.hpp"
#include "run/run.hpp"
#include "util/errors.hpp"

namespace po = boost::program_options;

namespace tether::cli {

bool parse_arguments(const std::vector<std::string>& arguments, po::options_description& options,
                     const char* positional_name) {
    po::positional_options_description positional;
    positional.add(positional_name, 1);
    po::variables_map vm;
    po::store(po::command_line_parser(arguments).options(options).positional(positional).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << options << "\n";
        return false;
    }
    return true;
}

void check_out_directory(const std::string& out) {
    std::error_code error;
    const auto status = std::filesystem::status(out, error);
    if (std::filesystem::exists(status) && !std::filesystem::is_directory(status))
        throw ConfigError("--out " + out + ": exists and is not a directory; give a new path or an existing run directory");
}

int report_verdict(const nlohmann::json& summary) {
    if (summary.contains("learning_warning"))
        std::fprintf(stderr, "tether: warning: %s\n", summary["learning_warning"].get<std::string>().c_str());
    if (!summary.value("run_failed", false)) return 0;
    std::fprintf(stderr, "tether: run FAILED: %s\n", summary.value("failure_reason", std::string("unknown")).c_str());
    for (const auto& f : summary.value("worker_failures", nlohmann::json::array()))
        std::fprintf(stderr, "  worker %d: %s\n", f.value("worker", -1), f.value("reason", std::string()).c_str());
    return 1;
}

int run_command(const std::vector<std::string>& arguments) {
    po::options_description options("tether run CONFIG.json [options]");
    std::string config_path, out, resume;
    std::vector<std::string> overrides;
    options.add_options()("help,h", "show this help")(
        "set", po::value(&overrides)->composing(), "override a config key: --set training.epochs=5 (repeatable)")(
        "out", po::value(&out), "run directory (default runs/<name>-<timestamp>/)")(
        "config", po::value(&config_path), "the config file (positional)")(
        "resume", po::value(&resume), "go on from RUN_DIR/checkpoint.bin, in RUN_DIR (config from RUN_DIR/config.json unless given)");
    if (!parse_arguments(arguments, options, "config")) return 0;
    if (!resume.empty()) {
        if (config_path.empty()) config_path = resume + "/config.json";
        if (out.empty()) out = resume;
    }
    if (config_path.empty()) throw po::error("tether run needs a config file: tether run CONFIG.json");
    if (!out.empty()) check_out_directory(out);

    const RunConfig config = load_config(config_path, overrides);
    const std::string directory = out.empty() ? default_run_directory(config.name) : out;
    const nlohmann::json summary = run_experiment(config, directory, !resume.empty());
    std::printf("final %s; %.0f samples/s, %.1f s; run directory %s\n", accuracy_line(summary).c_str(),
                summary.value("samples_per_second", 0.0), summary.value("wall_seconds", 0.0), directory.c_str());
    std::printf("plots: /usr/bin/python3 experiments/plot.py %s\n", directory.c_str());
    return report_verdict(summary);
}

}  // namespace tether::cli
