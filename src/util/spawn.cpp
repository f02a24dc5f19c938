#include "util/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace tether {

pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log, bool (*drop)(const std::string&),
                   const std::vector<std::string>& more) {
    std::vector<std::string> kept_args = args, kept_environment;
    for (char** e = environ; *e; ++e)
        if (!drop || !drop(*e)) kept_environment.emplace_back(*e);
    kept_environment.insert(kept_environment.end(), more.begin(), more.end());
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

namespace {
// Polls: waitpid has no timeout. True when the child was reaped.
bool reaped_by(pid_t pid, std::chrono::steady_clock::time_point deadline, int& status) {
    while (true) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}
}  // namespace

ChildExit wait_or_kill(pid_t pid, std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds term_grace) {
    int status = 0;
    if (!reaped_by(pid, deadline, status)) {
        ::kill(pid, SIGTERM);
        ::kill(pid, SIGCONT);  // a SIGSTOPped child acts on SIGTERM only once continued
        if (!reaped_by(pid, std::chrono::steady_clock::now() + term_grace, status)) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);  // SIGKILL cannot be ignored: this returns
        }
    }
    return ChildExit::of(status);
}

ChildExit ChildExit::of(int status) {
    if (WIFEXITED(status)) return {WEXITSTATUS(status), 0};
    return {0, WTERMSIG(status)};
}

std::string ChildExit::words() const {
    if (signal == 0) return "exited with code " + std::to_string(code);
    return "was ended by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
}

}  // namespace tether
