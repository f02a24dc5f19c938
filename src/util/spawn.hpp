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

// How a child process ended: the code it exited with, or the signal that ended it.
struct ChildExit {
    int code = 0;
    int signal = 0;  // 0: it exited (with `code`)

    static ChildExit of(int waitpid_status);
    bool ok() const { return signal == 0 && code == 0; }
    // "exited with code 3", "was ended by signal 9 (Killed)".
    std::string words() const;
};

// Waits for `pid` until `deadline`; then SIGTERM, and SIGKILL when it is still there after
// `term_grace` (a stopped or wedged child ignores SIGTERM). Every wait is bounded.
ChildExit wait_or_kill(pid_t pid, std::chrono::steady_clock::time_point deadline,
                       std::chrono::milliseconds term_grace = std::chrono::milliseconds(3000));

}  // namespace tether
