// Whether a distributed run succeeded, said plainly: a run where no update reached x~, or where
// more than cluster.max_failed_share of the workers failed, is a failed run (exit code 1), even
// though the center produced a final x~ and an accuracy.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cluster/cluster_settings.hpp"

namespace tether {

// One worker that did not finish: its index and why (the error it printed, e.g.
// "diverged at step 12 (loss nan)", or how its process ended).
struct WorkerFailure {
    int worker = 0;
    std::string reason;
};

// Writes into `summary`: failed_workers, diverged_workers, worker_failures, run_failed and,
// when failed, failure_reason. Reads updates_applied and workers_lost from the summary (the
// center's counters); a lost worker that was not already reported counts as failed.
void judge_run(nlohmann::json& summary, const ClusterSettings& cluster, const std::vector<WorkerFailure>& failures);

// The last "error:" line of a worker's log, or "" (for a failed worker process's reason).
std::string last_error_line(const std::string& log_path);

}  // namespace tether
