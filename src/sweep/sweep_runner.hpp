// Runs a sweep: each run is a `tether run` child process writing its own run directory under
// the sweep directory; up to `jobs` at once. Runs whose directory already holds a summary for
// the same config are skipped, so an interrupted sweep resumes where it stopped.
#pragma once

#include <string>

#include "sweep/sweep_plan.hpp"

namespace tether {

struct SweepOptions {
    std::string directory;
    int jobs = 1;
    std::string tether_binary;  // the executable that runs each `tether run`
};

struct SweepOutcome {
    int completed = 0, skipped = 0, failed = 0;
};

SweepOutcome run_sweep(const SweepPlan& plan, const SweepOptions& options);

// Writes summary.csv and summary.md into the sweep directory from the runs' directories.
// Returns the markdown table.
std::string write_sweep_report(const SweepPlan& plan, const std::string& directory);

}  // namespace tether
