// Running a whole experiment from a config: what `tether run` does.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "config/config.hpp"

namespace tether {

// Trains as the config says, writes the run directory `directory` and returns the summary.
// With `resume`, the center starts from directory/checkpoint.bin (distributed strategies only).
nlohmann::json run_experiment(const RunConfig& config, const std::string& directory, bool resume = false);

// cluster.mode "local" with cluster.server_placement "ranks": N `tether worker` processes as a
// launcher's ranks on this host, each a server and a worker (run/local_ranks_run.cpp).
nlohmann::json run_local_ranks(const RunConfig& config, const std::string& directory, bool resume);

// One worker, no center: the reference every distributed strategy is compared with.
nlohmann::json run_sequential(const RunConfig& config, const std::string& directory);

// Threads each of `workers` workers may use for its own vector work (cores / workers unless
// training.threads says otherwise).
int threads_per_worker(const RunConfig& config, int workers);

}  // namespace tether
