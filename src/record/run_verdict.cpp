#include "record/run_verdict.hpp"

#include "util/errors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace tether {

void judge_run(nlohmann::json& summary, const ClusterSettings& cluster, const std::vector<WorkerFailure>& failures) {
    const int workers = int(cluster.workers);
    // In a `tether server` run the center's count of lost workers is all we know; in runs that
    // started the workers, each failure is also known by its process or thread.
    // A lost worker whose place another took back (a restart, a rejoin after an outage) failed
    // nothing. Workers lost before their first exchange count where nothing else would notice
    // them: a run with a plan sees their data untrained in trained_share, and a flood of welcomed
    // peers that never exchange (an elastic run without keys) then fails nothing.
    const bool plan_known = summary.value("samples_planned", std::uint64_t(0)) > 0;
    const int lost = std::max(0, summary.value("workers_lost", 0) - summary.value("places_retaken", 0)) +
                     (plan_known ? 0 : summary.value("workers_silent", 0));
    const int failed = std::min(workers, std::max(int(failures.size()), lost));
    int diverged = 0;
    nlohmann::json listed = nlohmann::json::array();
    for (const auto& f : failures) {
        if (f.diverged) ++diverged;
        listed.push_back({{"worker", f.worker}, {"reason", f.reason}});
    }
    summary["failed_workers"] = failed;
    summary["diverged_workers"] = diverged;
    summary["worker_failures"] = listed;
    std::string reason;
    const auto updates = summary.value("updates_applied", std::uint64_t(0));
    if (updates == 0) {
        reason = "no update reached x~ (center version 0): the final model is the initial one";
    } else if (double(failed) > cluster.max_failed_share * double(workers)) {
        reason = std::to_string(failed) + " of " + std::to_string(workers) + " workers failed, more than cluster.max_failed_share (" +
                 nlohmann::json(cluster.max_failed_share).dump() + ")";
    }
    // Where the plan is known (a run tether started, with its data and epochs), the share of it
    // trained: a run that lost a worker's data is not a success because the others finished.
    const auto planned = summary.value("samples_planned", std::uint64_t(0));
    if (planned > 0) {
        const double trained = summary.value("samples", 0.0);
        const double share = trained / double(planned);
        summary["trained_share"] = share;
        if (reason.empty() && share < cluster.min_trained_share) {
            char figure[32];
            std::snprintf(figure, sizeof figure, "%.3f", share);
            reason = "the workers trained " + std::string(figure) + " of the planned samples (" +
                     std::to_string(std::uint64_t(trained)) + " of " + std::to_string(planned) +
                     "), less than cluster.min_trained_share (" + nlohmann::json(cluster.min_trained_share).dump() + ")";
        }
    }
    // A server of several whose final range server 0 may not hold (center/run_end.hpp): the
    // run's final model is not whole, whatever this server's own counters say.
    if (reason.empty() && summary.contains("final_range_missing")) reason = summary["final_range_missing"].get<std::string>();
    // A model that did not learn (record/learning_verdict.hpp, judged when the records were
    // written), where eval.require_learning holds.
    if (reason.empty() && summary.value("learning_required", false) && summary.contains("learning_failure"))
        reason = summary["learning_failure"].get<std::string>();
    if (!reason.empty() && diverged > 0)
        reason += "; " + std::to_string(diverged) + " diverged (first: worker " + [&] {
            for (const auto& f : failures)
                if (f.diverged) return std::to_string(f.worker) + ": " + f.reason;
            return std::string();
        }() + ")";
    summary["run_failed"] = !reason.empty();
    if (!reason.empty()) summary["failure_reason"] = reason;
}

std::string last_error_line(const std::string& log_path) {
    std::ifstream in(log_path);
    std::string line, last;
    while (std::getline(in, line))
        if (line.find("error:") != std::string::npos) last = line;
    const auto at = last.find("error: ");
    return at == std::string::npos ? last : last.substr(at + 7);
}

void count_child_exit(int index, const ChildExit& exit, const std::string& log, nlohmann::json& exits,
                      std::vector<WorkerFailure>& failures) {
    const std::string signal = "signal " + std::to_string(exit.signal);
    exits.push_back(exit.signal ? nlohmann::json(signal) : nlohmann::json(exit.code));
    if (exit.ok()) return;
    std::string reason = last_error_line(log);
    if (reason.empty()) reason = exit.signal ? "ended by " + signal : "exit code " + std::to_string(exit.code);
    failures.push_back({index, reason, exit.signal == 0 && exit.code == kDivergedExit});
}

}  // namespace tether
