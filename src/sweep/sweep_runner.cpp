#include "sweep/sweep_runner.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "record/run_recorder.hpp"
#include "util/spawn.hpp"

namespace tether {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<json> read_json_file(const fs::path& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    const json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
}

// Complete: a summary exists and the run was made from this very config.
bool complete(const fs::path& dir, const json& document) {
    const auto input = read_json_file(dir / "input.json");
    return input && *input == document && fs::exists(dir / "summary.json");
}

pid_t spawn_run(const std::string& binary, const fs::path& dir) {
    return spawn_logged({binary, "run", (dir / "input.json").string(), "--out", dir.string()}, (dir / "log.txt").string());
}

}  // namespace

SweepOutcome run_sweep(const SweepPlan& plan, const SweepOptions& options) {
    SweepOutcome outcome;
    const std::size_t total = plan.runs.size();
    std::map<pid_t, std::pair<std::size_t, std::chrono::steady_clock::time_point>> running;
    std::size_t next = 0;
    auto report_done = [&](std::size_t i, int status, double seconds) {
        const SweepRun& run = plan.runs[i];
        const fs::path dir = fs::path(options.directory) / run.id;
        if (status == 0) {
            ++outcome.completed;
            const auto summary = read_json_file(dir / "summary.json").value_or(json::object());
            std::printf("[%zu/%zu] done    %s: final %s in %.1f s\n", i + 1, total, run.id.c_str(),
                        accuracy_line(summary).c_str(), seconds);
        } else {
            ++outcome.failed;
            // A run that ended and said why in its summary (run_failed: it diverged, no update
            // reached x~) is a result, kept for the report and not rerun on resume; one that
            // crashed or was killed leaves no trustworthy summary and is rerun.
            const auto summary = read_json_file(dir / "summary.json").value_or(json::object());
            const bool reported = summary.value("run_failed", false);
            if (!reported) fs::remove(dir / "summary.json");
            std::printf("[%zu/%zu] FAILED  %s (exit %d%s): see %s\n", i + 1, total, run.id.c_str(), status,
                        reported ? (", " + summary.value("failure_reason", std::string("run failed"))).c_str() : "",
                        (dir / "log.txt").c_str());
        }
        std::fflush(stdout);
    };
    while (next < total || !running.empty()) {
        while (next < total && int(running.size()) < options.jobs) {
            const std::size_t i = next++;
            const SweepRun& run = plan.runs[i];
            const fs::path dir = fs::path(options.directory) / run.id;
            if (complete(dir, run.document)) {
                ++outcome.skipped;
                std::printf("[%zu/%zu] skipped %s: already complete\n", i + 1, total, run.id.c_str());
                continue;
            }
            fs::create_directories(dir);
            fs::remove(dir / "summary.json");  // a stale summary must not mark a rerun complete
            write_json_file((dir / "input.json").string(), run.document);
            running[spawn_run(options.tether_binary, dir)] = {i, std::chrono::steady_clock::now()};
            std::printf("[%zu/%zu] running %s (%zu running)\n", i + 1, total, run.id.c_str(), running.size());
            std::fflush(stdout);
        }
        if (running.empty()) break;
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, 0);
        const auto it = running.find(pid);
        if (it == running.end()) continue;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.second).count();
        report_done(it->second.first, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), seconds);
        running.erase(it);
    }
    return outcome;
}

}  // namespace tether
