#include "cluster/run_keys.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "transport/curve_keys.hpp"
#include "util/errors.hpp"

namespace tether {

namespace fs = std::filesystem;

namespace {

// The workers' public key is the allowlist: all of a run's workers share one pair.
CurveKeys keys_of(const CurveKeyPair& center, const CurveKeyPair& worker) {
    return {center.public_key, center.secret_key, worker.public_key, worker.secret_key, worker.public_key};
}

std::string no_secret(const std::string& why) {
    return "security: the ranks of this launcher job need a shared secret to agree on CURVE keys, and " + why +
           "; export TETHER_SECRET=$(tether keygen --secret) in the job script (launchers pass the environment on), or "
           "give security.* keys, or set security.insecure true to run without (docs/architecture.md#security)";
}

fs::path home_folder() {
    if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".tether";
    if (const passwd* user = ::getpwuid(::getuid()); user && user->pw_dir) return fs::path(user->pw_dir) / ".tether";
    throw ConfigError(no_secret("neither HOME nor the password database names a home directory for ~/.tether"));
}

fs::path secret_path(const LauncherKeyRequest& r) {
    std::string job;  // as a file name: letters, digits, '.', '_' and '-' only
    for (const char c : r.job_id) job += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
    return (r.directory.empty() ? home_folder() : fs::path(r.directory)) / ("run-" + job) / "secret";
}

// A folder only this user may enter: made 0700, or an existing one of this user's tightened to it.
void make_private_folder(const fs::path& folder) {
    std::error_code error;
    fs::create_directories(folder, error);
    struct stat st {};
    if (error || ::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw std::runtime_error("cannot make the folder " + folder.string() + " for the launcher job's secret" +
                                 (error ? ": " + error.message() : ""));
    if (st.st_uid != ::getuid())
        throw ConfigError(no_secret(folder.string() + " belongs to another user, so rank 0 cannot keep a secret there"));
    ::chmod(folder.c_str(), 0700);
}

// The secret in `path` when it is this user's, private, written within the last `max_age`
// (an older one is another job's that used the same id), and long enough; else "".
std::string read_fresh_secret(const fs::path& path, std::chrono::milliseconds max_age) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || st.st_uid != ::getuid() || (st.st_mode & 077) != 0) return "";
    const auto written = std::chrono::system_clock::from_time_t(st.st_mtime);
    if (std::chrono::system_clock::now() - written > max_age) return "";
    std::ifstream in(path);
    std::string secret;
    std::getline(in, secret);
    return secret.size() >= 32 ? secret : "";
}

}  // namespace

CurveKeys fresh_run_keys() { return keys_of(generate_curve_key_pair(), generate_curve_key_pair()); }

CurveKeys write_run_keys(const std::string& directory) {
    const fs::path folder = fs::absolute(fs::path(directory) / "keys");
    std::error_code error;
    fs::create_directories(folder, error);
    if (error) throw std::runtime_error(folder.string() + ": cannot make the folder of the run's keys: " + error.message());
    ::chmod(folder.c_str(), 0700);
    write_curve_key_pair((folder / "center").string(), generate_curve_key_pair());
    write_curve_key_pair((folder / "worker").string(), generate_curve_key_pair());
    const std::string worker_public_key = (folder / "worker.pub").string();  // one line: also the allowlist
    return {(folder / "center.pub").string(), (folder / "center.key").string(), worker_public_key,
            (folder / "worker.key").string(), worker_public_key};
}

CurveKeys keys_from_secret(const std::string& secret, const std::string& source) {
    if (secret.size() < 32)
        throw ConfigError(source + ": " + std::to_string(secret.size()) + " characters; a shared secret needs at least 32 "
                          "(tether keygen --secret prints 64 hexadecimal digits)");
    return keys_of(derive_curve_key_pair(secret, "center"), derive_curve_key_pair(secret, "worker"));
}

CurveKeys launcher_keys(const LauncherKeyRequest& r) {
    if (const char* secret = std::getenv("TETHER_SECRET"); secret && *secret) return keys_from_secret(secret, "TETHER_SECRET");
    if (r.job_id.empty()) throw ConfigError(no_secret("TETHER_SECRET is not set and the launcher gave no job id to name a key file by"));
    const fs::path path = secret_path(r);
    if (r.rank == 0) {
        make_private_folder(path.parent_path().parent_path());
        make_private_folder(path.parent_path());
        const std::string secret = generate_secret();
        // Written whole under another name, then renamed: a rank never reads half a secret.
        const fs::path partial = path.string() + ".partial-" + std::to_string(::getpid());
        const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const std::string line = secret + "\n";
        const bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == ssize_t(line.size());
        if (fd >= 0) ::close(fd);
        if (!written || ::rename(partial.c_str(), path.c_str()) != 0)
            throw std::runtime_error("cannot write the launcher job's secret to " + path.string());
        return keys_from_secret(secret, path.string());
    }
    // Rank 0 may start later than this rank: wait for its secret as a worker waits for its center.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(r.timeout_ms);
    const auto max_age = std::chrono::milliseconds(r.timeout_ms) + std::chrono::seconds(10);
    while (true) {
        const std::string secret = read_fresh_secret(path, max_age);
        if (!secret.empty()) return keys_from_secret(secret, path.string());
        if (std::chrono::steady_clock::now() > deadline)
            throw ConfigError(no_secret("TETHER_SECRET is not set and rank 0 wrote no secret to " + path.string() + " within " +
                                        std::to_string(r.timeout_ms) + " ms (cluster.join_timeout_ms; is the folder shared "
                                        "by every rank's host?)"));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

void remove_launcher_secret(const LauncherKeyRequest& r) {
    if (const char* secret = std::getenv("TETHER_SECRET"); (secret && *secret) || r.rank != 0 || r.job_id.empty()) return;
    std::error_code ignored;
    const fs::path path = secret_path(r);
    fs::remove(path, ignored);
    fs::remove(path.parent_path(), ignored);  // only when empty
}

}  // namespace tether
