// Starting a child tether process with its output in a log file. posix_spawn, not fork: the
// parent already runs threads (ZeroMQ's I/O threads, evaluators).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tether {

// Runs args[0] with `args`, stdout and stderr to `log` (truncated), and the environment of
// this process less the entries `drop` rejects, plus `more` ("NAME=value"). Throws
// std::runtime_error when it cannot start.
pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log,
                   bool (*drop)(const std::string& entry) = nullptr, const std::vector<std::string>& more = {});

// Waits for `pid` until `deadline`; then SIGTERM, and SIGKILL when it is still there after
// `term_grace` (a stopped or wedged child ignores SIGTERM). Every wait is bounded. Returns the
// child's exit as "0", "1", ... or "signal N".
std::string wait_or_kill(pid_t pid, std::chrono::steady_clock::time_point deadline,
                         std::chrono::milliseconds term_grace = std::chrono::milliseconds(3000));

// A waitpid status as wait_or_kill returns it: "0", "1", ... or "signal N".
std::string exit_description(int status);
// Such an exit in words: "exited with code 3", "was ended by signal 9 (Killed)".
std::string child_exit_words(const std::string& exit);

}  // namespace tether
