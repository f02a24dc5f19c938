#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "sweep/sweep_lock.hpp"
#include "sweep/sweep_plan.hpp"
#include "sweep/sweep_runner.hpp"

namespace po = boost::program_options;

namespace tether::cli {

int sweep_command(const std::vector<std::string>& arguments) {
    po::options_description options("tether sweep SWEEP.json [options]");
    std::string sweep_path, out;
    int jobs = 1, repeats = -1;  // -1: as the sweep file says
    SweepOverrides overrides;
    options.add_options()("help,h", "show this help")(
        "out", po::value(&out), "sweep directory (default sweeps/<sweep name>; rerunning resumes it)")(
        "jobs", po::value(&jobs)->default_value(1), "runs at once")(
        "set", po::value(&overrides.assignments)->composing(),
        "override a config key in every run: --set training.epochs=5 (repeatable; not a grid key)")(
        "repeats", po::value(&repeats), "seeds per grid point, replacing the sweep file's repeats")(
        "sweep", po::value(&sweep_path), "the sweep file");
    if (!parse_arguments(arguments, options, "sweep")) return 0;
    if (sweep_path.empty()) throw po::error("tether sweep needs a sweep file: tether sweep SWEEP.json");
    if (jobs < 1) throw po::error("--jobs must be at least 1");
    if (!out.empty()) check_out_directory(out);

    if (repeats != -1 && repeats < 1) throw po::error("--repeats must be at least 1");
    if (repeats != -1) overrides.repeats = repeats;
    const SweepPlan plan = load_sweep(sweep_path, overrides);  // every run's config is checked here
    const std::string directory = out.empty() ? "sweeps/" + plan.name : out;
    std::filesystem::create_directories(directory);
    const SweepLock lock(directory);
    std::printf("sweep %s: %zu runs over %zu grid keys, %d at once -> %s\n", plan.name.c_str(), plan.runs.size(),
                plan.keys.size(), jobs, directory.c_str());
    std::fflush(stdout);
    SweepOptions sweep_options{directory, jobs, std::filesystem::read_symlink("/proc/self/exe").string()};
    const SweepOutcome outcome = run_sweep(plan, sweep_options);
    const std::string table = write_sweep_report(plan, directory);
    std::printf("\n%s\n%d completed, %d skipped (already complete), %d failed\n", table.c_str(), outcome.completed,
                outcome.skipped, outcome.failed);
    std::printf("summaries: %s/summary.csv, %s/summary.md\nplots:     /usr/bin/python3 experiments/plot.py %s\n",
                directory.c_str(), directory.c_str(), directory.c_str());
    return outcome.failed ? 1 : 0;
}

}  // namespace tether::cli
