#include "util/spawn.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

extern char** environ;

namespace tether {

pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log, bool (*drop)(const std::string&)) {
    std::vector<std::string> kept_args = args, kept_environment;
    for (char** e = environ; *e; ++e)
        if (!drop || !drop(*e)) kept_environment.emplace_back(*e);
    auto pointers = [](std::vector<std::string>& strings) {
        std::vector<char*> out;
        for (auto& s : strings) out.push_back(s.data());
        out.push_back(nullptr);
        return out;
    };
    std::vector<char*> argv = pointers(kept_args), envp = pointers(kept_environment);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, args.at(0).c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(error));
    return pid;
}

}  // namespace tether
