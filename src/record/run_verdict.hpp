// Whether a distributed run succeeded, said plainly: a run where no update reached x~, where
// more than cluster.max_failed_share of the workers failed, whose workers trained less than
// cluster.min_trained_share of the planned samples, or whose model did not learn
// (record/learning_verdict.hpp, with eval.require_learning), is a failed run (exit code 1), even
// though the center produced a final x~ and an accuracy.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cluster/cluster_settings.hpp"
#include "util/spawn.hpp"

namespace tether {

// One worker that did not finish: its index and why (the error it printed, e.g.
// "diverged at step 12 (loss nan)", or how its process ended).
struct WorkerFailure {
    int worker = 0;
    std::string reason;
    // Its loss or parameters went non-finite (a DivergedError; a worker process's exit code
    // kDivergedExit), which the verdict counts apart from crashes and losses.
    bool diverged = false;
};

// Writes into `summary`: failed_workers, diverged_workers, worker_failures, run_failed and,
// when failed, failure_reason; trained_share where the summary holds samples_planned (runs tether
// started know their data and epochs; the embedding API does not). Reads updates_applied,
// workers_lost (welcomed workers only: peers that never joined are no worker of the run),
// workers_silent (welcomed, lost before any exchange: failed only where there is no plan),
// samples and samples_planned from the summary; a lost worker not already reported counts as failed.
void judge_run(nlohmann::json& summary, const ClusterSettings& cluster, const std::vector<WorkerFailure>& failures);

// The last "error:" line of a worker's log, or "" (for a failed worker process's reason).
std::string last_error_line(const std::string& log_path);

// A child process `index` that tether started ended with `exit`: appends it to `exits` as
// summary.json's worker_exit_status holds it (the exit code, or "signal 9") and, when it failed,
// a WorkerFailure to `failures`: the last error line of its `log`, or how it ended; diverged
// when it exited kDivergedExit.
void count_child_exit(int index, const ChildExit& exit, const std::string& log, nlohmann::json& exits,
                      std::vector<WorkerFailure>& failures);

}  // namespace tether
