// Starting a child tether process with its output in a log file. posix_spawn, not fork: the
// parent already runs threads (ZeroMQ's I/O threads, evaluators).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tether {

// Runs args[0] with `args`, stdout and stderr to `log` (truncated), and the environment of
// this process less the entries `drop` rejects. Throws std::runtime_error when it cannot start.
pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log,
                   bool (*drop)(const std::string& entry) = nullptr);

}  // namespace tether
