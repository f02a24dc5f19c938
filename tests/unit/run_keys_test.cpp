// The keys of runs tether starts itself (cluster/run_keys.hpp): pairs derived from a shared
// secret are the same for every holder and belong together; the ranks of a launcher job find
// the secret in TETHER_SECRET or in the file rank 0 writes (private, and not another job's);
// a local run's keys are files only the user may read; key settings take the key itself too.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <utime.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "cluster/run_keys.hpp"
#include "test_support.hpp"
#include "transport/curve_keys.hpp"
#include "util/errors.hpp"

using namespace tether;
using tether::testing::contains;
using tether::testing::TempDir;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

unsigned mode_of(const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return st.st_mode & 0777;
}

// TETHER_SECRET as a test wants it, put back as it was afterwards.
class SecretVariable {
public:
    explicit SecretVariable(const char* value) {
        if (const char* old = std::getenv("TETHER_SECRET")) old_ = old;
        if (value) ::setenv("TETHER_SECRET", value, 1);
        else ::unsetenv("TETHER_SECRET");
    }
    ~SecretVariable() {
        if (old_.empty()) ::unsetenv("TETHER_SECRET");
        else ::setenv("TETHER_SECRET", old_.c_str(), 1);
    }

private:
    std::string old_;
};

}  // namespace

TEST_CASE("pairs derived from one secret are the same everywhere, differ by role and secret, and belong together") {
    const CurveKeys a = keys_from_secret(kSecret, "test"), b = keys_from_secret(kSecret, "test");
    CHECK(a.center_public_key == b.center_public_key);
    CHECK(a.worker_secret_key == b.worker_secret_key);
    CHECK(a.center_public_key != a.worker_public_key);
    CHECK(curve_public_key_of(a.center_secret_key) == a.center_public_key);
    CHECK(curve_public_key_of(a.worker_secret_key) == a.worker_public_key);
    CHECK(a.authorized_workers == a.worker_public_key);
    std::string other = kSecret;
    other[0] = '1';
    CHECK(keys_from_secret(other, "test").center_public_key != a.center_public_key);
    CHECK_THROWS_WITH_AS(keys_from_secret("short", "TETHER_SECRET"), doctest::Contains("TETHER_SECRET: 5 characters"),
                         ConfigError);
    const std::string fresh = generate_secret();
    CHECK(fresh.size() == 64);
    CHECK(fresh.find_first_not_of("0123456789abcdef") == std::string::npos);
}

TEST_CASE("launcher ranks take TETHER_SECRET first, else the secret rank 0 writes, else say how to set one") {
    TempDir dir;
    {
        SecretVariable set(kSecret.c_str());
        CHECK(launcher_keys({3, "", "", 100}).center_public_key == keys_from_secret(kSecret, "x").center_public_key);
    }
    SecretVariable unset(nullptr);
    CHECK_THROWS_WITH_AS(launcher_keys({1, "", dir.path().string(), 100}),
                         doctest::Contains("export TETHER_SECRET=$(tether keygen --secret)"), ConfigError);
    // Rank 1 starts first and waits; rank 0 writes the secret into a folder only its user may enter.
    auto rank1 = std::async(std::launch::async, [&] { return launcher_keys({1, "job/42", dir.path().string(), 5000}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const CurveKeys rank0 = launcher_keys({0, "job/42", dir.path().string(), 5000});
    CHECK(rank1.get().center_public_key == rank0.center_public_key);
    const std::string folder = dir.file("run-job_42");
    CHECK(mode_of(folder) == 0700);
    CHECK(mode_of(folder + "/secret") == 0600);
    remove_launcher_secret({0, "job/42", dir.path().string(), 5000});
    CHECK_FALSE(std::filesystem::exists(folder));
}

TEST_CASE("a secret left by an earlier job of the same id is not taken") {
    TempDir dir;
    SecretVariable unset(nullptr);
    launcher_keys({0, "7", dir.path().string(), 1000});
    const std::string path = dir.file("run-7/secret");
    const utimbuf an_hour_ago{std::time(nullptr) - 3600, std::time(nullptr) - 3600};
    REQUIRE(::utime(path.c_str(), &an_hour_ago) == 0);
    const std::string expected = "rank 0 wrote no secret to " + path;
    CHECK_THROWS_WITH_AS(launcher_keys({1, "7", dir.path().string(), 300}), doctest::Contains(expected.c_str()), ConfigError);
}

TEST_CASE("a local run's keys are files in RUN_DIR/keys that only the user may read") {
    TempDir dir;
    const CurveKeys keys = write_run_keys(dir.file("run"));
    CHECK(mode_of(dir.file("run/keys")) == 0700);
    CHECK(mode_of(keys.center_secret_key) == 0600);
    CHECK(mode_of(keys.worker_secret_key) == 0600);
    const std::string center_secret = read_curve_key(keys.center_secret_key, "k");
    CHECK(curve_public_key_of(center_secret) == read_curve_key(keys.center_public_key, "k"));
    CHECK(read_curve_allowlist(keys.authorized_workers, "k") ==
          std::set<std::string>{read_curve_key(keys.worker_public_key, "k")});
    const CurveKeys other = write_run_keys(dir.file("other"));
    CHECK(read_curve_key(other.center_public_key, "k") != read_curve_key(keys.center_public_key, "k"));  // fresh each run
}

TEST_CASE("a key setting takes the Z85 key itself, an allowlist keys separated by ','") {
    const CurveKeyPair a = generate_curve_key_pair(), b = generate_curve_key_pair();
    CHECK(read_curve_key(a.public_key, "security.center_public_key") == a.public_key);
    CHECK(read_curve_allowlist(a.public_key + "," + b.public_key, "security.authorized_workers") ==
          std::set<std::string>{a.public_key, b.public_key});
    CHECK_THROWS_WITH_AS(read_curve_allowlist(a.public_key + ",nonsense", "security.authorized_workers"),
                         doctest::Contains("security.authorized_workers: \"nonsense\" is not a Z85 public key"), ConfigError);
    CHECK_THROWS_WITH_AS(read_curve_key("/no/such/file", "security.worker_secret_key"),
                         doctest::Contains("security.worker_secret_key: cannot read the key file \"/no/such/file\""), ConfigError);
}
