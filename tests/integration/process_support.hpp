// Child processes for the multi-process tests: spawn the built `tether` binary (its path in
// TETHER_BIN, set by meson) with stdout and stderr in files, wait with a deadline, and kill
// whatever is left (the process and the workers it started) so a failing test never hangs.
#pragma once

#include <doctest/doctest.h>

#include "transport/tcp_probe.hpp"
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

extern char** environ;

namespace tether::testing {

inline std::string tether_binary() {
    const char* path = std::getenv("TETHER_BIN");
    REQUIRE_MESSAGE(path != nullptr, "set TETHER_BIN to the built tether binary (meson test does)");
    return path;
}

// The processes whose parent is `parent`, from /proc/*/stat.
inline std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> children;
    DIR* proc = opendir("/proc");
    if (!proc) return children;
    while (const dirent* entry = readdir(proc)) {
        const pid_t pid = pid_t(std::atoi(entry->d_name));
        if (pid <= 0) continue;
        std::ifstream in(std::string("/proc/") + entry->d_name + "/stat");
        std::string stat;
        if (!std::getline(in, stat)) continue;
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so skip past the last ')'.
        const auto close = stat.rfind(')');
        if (close == std::string::npos) continue;
        char state = 0;
        int ppid = 0;
        if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent)
            children.push_back(pid);
    }
    closedir(proc);
    return children;
}

// A child process with stdout and stderr in files; killed (with its own children) on
// destruction unless it has been waited for.
class Process {
public:
    // `extra_environment`: "NAME=value" entries added to this process's environment.
    Process(const std::vector<std::string>& arguments, const std::string& out_path, const std::string& err_path,
            const std::vector<std::string>& extra_environment = {})
        : out_path_(out_path), err_path_(err_path) {
        const std::string binary = tether_binary();
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        std::vector<std::string> args{binary};
        args.insert(args.end(), arguments.begin(), arguments.end());
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> environment(extra_environment);
        for (char** e = environ; *e; ++e) environment.emplace_back(*e);
        std::vector<char*> envp;
        for (auto& e : environment) envp.push_back(e.data());
        envp.push_back(nullptr);
        const int error = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        REQUIRE_MESSAGE(error == 0, ("posix_spawn " + binary + ": " + std::strerror(error)));
    }
    ~Process() { kill_all(); }
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }

    // The exit status if the process has ended, without waiting.
    std::optional<int> poll() {
        if (status_) return status_;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_)
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return status_;
    }

    // Waits up to timeout_ms; the exit code, 128 + signal when killed, or nullopt on timeout
    // (the process is then killed).
    std::optional<int> wait(int timeout_ms) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (std::chrono::steady_clock::now() < deadline) {
            if (poll()) return status_;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (poll()) return status_;
        kill_all();
        return std::nullopt;
    }
    std::string out() const { return tether::testing::read_text(out_path_); }
    std::string err() const { return tether::testing::read_text(err_path_); }

private:
    void kill_all() {
        if (status_ || pid_ <= 0) return;
        for (pid_t child : children_of(pid_)) ::kill(child, SIGKILL);
        ::kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
        status_ = 128 + SIGKILL;
    }

    std::string out_path_, err_path_;
    pid_t pid_ = -1;
    std::optional<int> status_;
};

// Polls `path` until it holds a line starting with `prefix`; returns that line, "" on timeout.
inline std::string wait_for_line(const std::string& path, const std::string& prefix, int timeout_ms, Process& process) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        std::ifstream in(path);
        for (std::string line; std::getline(in, line);)
            if (line.rfind(prefix, 0) == 0) return line;
        if (process.poll()) return "";  // it died
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
}

// The addresses a `tether server` says it listens at (all its servers', separated by ','), read
// from its stdout file `out_path`; fails the test when it dies or says nothing within 20 s.
inline std::string listening_addresses(Process& server, const std::string& out_path) {
    const std::string prefix = "center listening at ";
    const std::string line = wait_for_line(out_path, prefix, 20000, server);
    CAPTURE(server.err());
    REQUIRE_MESSAGE(!line.empty(), "a server never said where it listens");
    const std::string rest = line.substr(prefix.size());
    return rest.substr(0, rest.find(", waiting"));
}

// The first address a `tether server` writing its stdout to `out` reports.
inline std::string start_server(Process& server, const TempDir& dir, const std::string& out) {
    (void)dir;
    const std::string all = listening_addresses(server, out);
    return all.substr(0, all.find(','));
}

// The center version recorded in a checkpoint.bin header (center/checkpoint.hpp).
inline std::uint64_t checkpoint_version(const std::string& path) {
    const std::string bytes = tether::testing::read_text(path);
    REQUIRE(bytes.size() >= 28);
    REQUIRE(bytes.compare(0, 8, "TETHCKPT") == 0);
    std::uint64_t version = 0;
    for (int i = 0; i < 8; ++i) version |= std::uint64_t(std::uint8_t(bytes[20 + i])) << (8 * i);
    return version;
}

// Polls a run directory until its metrics.jsonl holds an evaluation after the one at t = 0 (the
// center writes that one before any worker has joined): training is under way. False on timeout.
inline bool wait_for_training(const std::string& run_directory, int timeout_ms, Process& process) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
        if (tether::testing::lines_in(run_directory + "/metrics.jsonl") >= 2) return true;
        if (process.poll()) return false;  // it died
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

// A TCP port on 127.0.0.1 that was free a moment ago (for starting a worker before its server).
inline int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    socklen_t length = sizeof address;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    close(fd);
    return ntohs(address.sin_port);
}

// A port P on 127.0.0.1 such that P - 1 .. P + count - 1 were free a moment ago: a launcher's job
// (MASTER_PORT = P - 1) whose ranks each host a server at P + k.
inline int free_ports(int count) { return tether::free_loopback_ports(count + 1) + 1; }

// A small synthetic problem that the distributed strategies learn in a few seconds.
inline nlohmann::json cluster_config(const std::string& name, const std::string& strategy, int workers) {
    nlohmann::json document = nlohmann::json::parse(R"({
        "data": {"source": "synthetic", "train_samples": 1200, "test_samples": 300,
                 "features": 8, "classes": 3, "noise": 1.0},
        "model": {"hidden_layers": [16]},
        "training": {"epochs": 6, "batch_size": 16, "device": "cpu", "threads": 1, "seed": 4,
                     "optimizer": {"name": "adam", "learning_rate": 0.01}},
        "eval": {"per_epoch": 1, "target_accuracy": 0.9},
        "cluster": {"worker_timeout_ms": 1500, "heartbeat_ms": 200, "join_timeout_ms": 10000,
                    "reply_timeout_ms": 30000}
    })");
    document["name"] = name;
    document["strategy"] = {{"name", strategy}, {"communication_window", 4}};
    document["cluster"]["workers"] = workers;
    return document;
}

inline std::string write_config(const TempDir& dir, const std::string& file, const nlohmann::json& document) {
    const std::string path = dir.file(file);
    tether::testing::write_text(path, document.dump(2));
    return path;
}

// A "security" block of fresh key files made by `tether keygen` in `dir`: the center's pair, one
// worker pair, and the allowlist holding that worker's key.
inline nlohmann::json keygen_security(const TempDir& dir) {
    for (const char* name : {"center", "worker"}) {
        Process keygen({"keygen", "--out", dir.file(name)}, dir.file(std::string(name) + ".keygen.out"), dir.file("keygen.err"));
        REQUIRE(keygen.wait(10000) == std::optional<int>(0));
    }
    tether::testing::write_text(dir.file("allowed"), tether::testing::read_text(dir.file("worker.pub")));
    return {{"center_public_key", dir.file("center.pub")}, {"center_secret_key", dir.file("center.key")},
            {"worker_public_key", dir.file("worker.pub")}, {"worker_secret_key", dir.file("worker.key")},
            {"authorized_workers", dir.file("allowed")}};
}

inline nlohmann::json read_summary(const std::string& run_directory) {
    const std::string path = run_directory + "/summary.json";
    REQUIRE_MESSAGE(std::filesystem::exists(path), (path + " is missing"));
    return nlohmann::json::parse(tether::testing::read_text(path));
}

}  // namespace tether::testing
