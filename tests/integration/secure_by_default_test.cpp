// Secure by default where tether starts the processes (docs/architecture.md#security): a local
// run binds ipc:// sockets in a folder only its user may enter (over tcp:// it writes keys of its
// own), and an embedded run over tcp:// holds keys in memory; launcher
// ranks derive theirs from TETHER_SECRET or from the secret rank 0 leaves in ~/.tether; a
// center that binds beyond loopback without keys refuses to start (the command and the API),
// unless security.insecure says so. Servers beyond loopback are never bound here: the address
// refused is 198.18.0.1, which no interface of the test's host has.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <tether/tether.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "cluster/cluster_settings.hpp"
#include "cluster/run_keys.hpp"
#include "config/config.hpp"
#include "process_support.hpp"
#include "run/run.hpp"
#include "test_support.hpp"
#include "transport/curve_keys.hpp"
#include "transport/user_sockets.hpp"

namespace {

using namespace tether::testing;
using nlohmann::json;

}  // namespace

TEST_CASE("tether server beyond loopback without keys exits 2 naming the address and the ways out; loopback warns") {
    TempDir dir;
    json document = cluster_config("bind", "adag", 1);
    document["cluster"]["join_timeout_ms"] = 1000;
    const std::string config = write_config(dir, "c.json", document);
    Process refused({"server", "--config", config, "--bind", "tcp://198.18.0.1:*", "--out", dir.file("r")}, dir.file("r.out"),
                    dir.file("r.err"));
    CHECK(refused.wait(20000) == std::optional<int>(2));
    CHECK(contains(refused.err(), "cluster.endpoint tcp://198.18.0.1:*: binding beyond loopback without CURVE keys"));
    CHECK(contains(refused.err(), "security.center_public_key"));
    CHECK(contains(refused.err(), "set security.insecure true to bind without"));
    // Asked to be insecure: today's warning, and an attempt to bind (which fails here: exit 1).
    Process insecure({"server", "--config", config, "--bind", "tcp://198.18.0.1:*", "--out", dir.file("i"), "--set",
                      "security.insecure=true"},
                     dir.file("i.out"), dir.file("i.err"));
    CHECK(insecure.wait(20000) == std::optional<int>(1));
    CHECK(contains(insecure.err(), "the center binds tcp://198.18.0.1:* without security: anyone who can reach it can join and move x~"));
    // Loopback without keys: it serves, saying who else could join.
    Process server({"server", "--config", config, "--bind", "tcp://127.0.0.1:*", "--out", dir.file("s")}, dir.file("s.out"),
                   dir.file("s.err"));
    const std::string address = start_server(server, dir, dir.file("s.out"));
    CHECK(contains(server.err(), "without CURVE keys: any user of this host can join and move x~"));
    Process worker({"worker", "--config", config, "--connect", address}, dir.file("w.out"), dir.file("w.err"));
    CHECK(worker.wait(60000) == std::optional<int>(0));
    CHECK(server.wait(30000) == std::optional<int>(0));
}

TEST_CASE("a local run binds ipc:// sockets in a folder of its user's alone, needing no keys; over tcp it writes keys") {
    TempDir dir;
    json document = cluster_config("keys", "adag", 2);
    document["cluster"]["mode"] = "local";
    // The socket folder is made in XDG_RUNTIME_DIR when set: here, so the test can see it go.
    const std::string runtime = dir.file("runtime");
    std::filesystem::create_directories(runtime);
    ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
    Process run({"run", write_config(dir, "c.json", document), "--out", dir.file("run")}, dir.file("out"), dir.file("err"));
    CHECK(run.wait(90000) == std::optional<int>(0));
    ::unsetenv("XDG_RUNTIME_DIR");
    CAPTURE(run.err());
    CHECK(read_summary(dir.file("run"))["security"] == "user-only");
    CHECK_FALSE(contains(run.err(), "WARNING"));
    CHECK_FALSE(std::filesystem::exists(dir.file("run/keys")));  // no crypto between processes of one host
    CHECK(contains(read_text(dir.file("out")), "center at ipc://" + runtime + "/tether-"));
    CHECK(std::filesystem::is_empty(runtime));  // the socket folder is removed with the run
    CHECK(tether::user_only_address("inproc://x"));
    CHECK_FALSE(tether::user_only_address("ipc:///tmp/x"));  // /tmp: every user may enter
    CHECK_FALSE(tether::user_only_address("tcp://127.0.0.1:5555"));
    // Over tcp://127.0.0.1 (every user of the host can reach it): fresh keys in RUN_DIR/keys.
    document["cluster"]["endpoint"] = "tcp://127.0.0.1:*";
    Process tcp_run({"run", write_config(dir, "t.json", document), "--out", dir.file("tcp")}, dir.file("t.out"),
                    dir.file("t.err"));
    CHECK(tcp_run.wait(90000) == std::optional<int>(0));
    CAPTURE(tcp_run.err());
    CHECK(read_summary(dir.file("tcp"))["security"] == "curve");
    CHECK_FALSE(contains(tcp_run.err(), "WARNING"));
    struct stat st {};
    REQUIRE(::stat(dir.file("tcp/keys").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    const json written = json::parse(read_text(dir.file("tcp/config.json")));
    CHECK(written["security"]["center_secret_key"] == dir.file("tcp/keys/center.key"));  // the workers read it there
    // security.insecure over tcp: no keys, as before.
    document["security"] = {{"insecure", true}};
    Process open_run({"run", write_config(dir, "open.json", document), "--out", dir.file("open")}, dir.file("o.out"),
                     dir.file("o.err"));
    CHECK(open_run.wait(90000) == std::optional<int>(0));
    CHECK(read_summary(dir.file("open"))["security"] == "off");
    CHECK_FALSE(std::filesystem::exists(dir.file("open/keys")));
    // Embedded over tcp://127.0.0.1: keys in memory, none written.
    json embedded = cluster_config("embedded", "adag", 2);
    embedded["cluster"]["endpoint"] = "tcp://127.0.0.1:*";
    const json summary = tether::run_experiment(tether::parse_config(embedded), dir.file("embedded"));
    CHECK(summary["security"] == "curve");
    CHECK(summary["final_test_accuracy"].get<double>() >= 0.9);
    CHECK_FALSE(std::filesystem::exists(dir.file("embedded/keys")));
}

TEST_CASE("the embedding API: no keys beyond loopback is refused; Z85 keys in ServiceOptions admit only their holders") {
    tether::ServiceOptions open;
    open.address = "tcp://198.18.0.1:*";
    CHECK_THROWS_WITH_AS(tether::CenterService::start({1.f, 2.f}, open),
                         doctest::Contains("ServiceOptions.address tcp://198.18.0.1:*: binding beyond loopback without CURVE "
                                           "keys"),
                         tether::ConfigError);
    CHECK_THROWS_WITH_AS(tether::CenterService::start({1.f, 2.f}, open), doctest::Contains("ServiceOptions.insecure"),
                         tether::ConfigError);
    const tether::CurveKeyPair center = tether::generate_curve_key_pair(), worker = tether::generate_curve_key_pair();
    tether::ServiceOptions keyed;
    keyed.address = "tcp://127.0.0.1:*";
    keyed.join_timeout_ms = 20000;  // the center waits for the keyed worker past the keyless one's attempt
    keyed.curve_keys() = tether::CurveKeys{center.public_key, center.secret_key, worker.public_key, worker.secret_key, worker.public_key};
    TempDir dir;
    tether::ServiceOptions recorded = keyed;
    recorded.run_dir = dir.file("api-run");
    auto service = tether::CenterService::start({1.f, 2.f}, recorded);
    // A worker without keys gets no answer (its handshake fails) and gives up at the join timeout.
    tether::ServiceOptions keyless;
    keyless.join_timeout_ms = 1500;
    std::vector<float> stranger(2, 0.f);
    CHECK_THROWS_WITH(tether::WorkerClient::connect(service->address(), keyless, stranger.data(), 2),
                      doctest::Contains("no welcome"));
    std::vector<float> x(2, 0.f);
    auto client = tether::WorkerClient::connect(service->address(), keyed, x.data(), 2);
    CHECK(x == std::vector<float>{1.f, 2.f});  // welcomed with x~
    client->step(1);
    client->finish();
    service->wait();
    CHECK(json::parse(service->stats_json())["workers_finished"] == 1);
    // The run directory records the public keys, never a secret key given inline.
    const std::string written = read_text(dir.file("api-run/config.json"));
    CHECK(contains(written, center.public_key));
    CHECK_FALSE(contains(written, center.secret_key));
    CHECK_FALSE(contains(written, worker.secret_key));
}

TEST_CASE("launcher ranks derive keys from TETHER_SECRET or from rank 0's secret in ~/.tether; without either, exit 2") {
    TempDir dir;
    json document = cluster_config("launched", "adag", 1);
    // What is tested is the keys, not how fast a silent server is noticed: a loaded CI machine
    // can keep the server busy past cluster_config's 1.5 s (CI saw exactly that).
    document["cluster"]["worker_timeout_ms"] = 20000;
    document["cluster"]["heartbeat_ms"] = 1000;
    // Rank 1 of 2 (SLURM_NTASKS=2) whose rank 0 only hosts the center: the one worker.
    json launched = document;
    launched["cluster"]["center_trains"] = false;
    const std::string plain = write_config(dir, "plain.json", launched);
    // As a job script does: export TETHER_SECRET=$(tether keygen --secret)
    Process keygen({"keygen", "--secret"}, dir.file("secret.out"), dir.file("secret.err"));
    REQUIRE(keygen.wait(10000) == std::optional<int>(0));
    const std::string secret = keygen.out().substr(0, keygen.out().find('\n'));
    REQUIRE(secret.size() == 64);
    // The server holds the keys every rank derives from the secret (rank 0 would derive them itself).
    document["security"] = tether::security_block(tether::keys_from_secret(secret, "test"));
    Process server({"server", "--config", write_config(dir, "derived.json", document), "--bind", "tcp://127.0.0.1:*", "--out",
                    dir.file("s")},
                   dir.file("s.out"), dir.file("s.err"));
    const std::string address = start_server(server, dir, dir.file("s.out"));
    Process rank1({"worker", "--config", plain, "--connect", address}, dir.file("w.out"), dir.file("w.err"),
                  {"SLURM_PROCID=1", "SLURM_NTASKS=2", "TETHER_SECRET=" + secret});
    CHECK(rank1.wait(60000) == std::optional<int>(0));
    CAPTURE(rank1.err());
    CHECK(server.wait(30000) == std::optional<int>(0));
    // No TETHER_SECRET: the secret rank 0 wrote for this job in HOME/.tether.
    const tether::CurveKeys written = tether::launcher_keys({0, "4242", dir.file(".tether"), 10000});
    document["security"] = tether::security_block(written);
    Process second({"server", "--config", write_config(dir, "written.json", document), "--bind", "tcp://127.0.0.1:*", "--out",
                    dir.file("t")},
                   dir.file("t.out"), dir.file("t.err"));
    const std::string second_address = start_server(second, dir, dir.file("t.out"));
    Process reader({"worker", "--config", plain, "--connect", second_address}, dir.file("v.out"), dir.file("v.err"),
                   {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_JOB_ID=4242", "HOME=" + dir.path().string()});
    CHECK(reader.wait(60000) == std::optional<int>(0));
    CAPTURE(reader.err());
    CHECK(second.wait(30000) == std::optional<int>(0));
    // Neither: refused at once, saying how.
    Process lost({"worker", "--config", plain, "--connect", second_address}, dir.file("x.out"), dir.file("x.err"),
                 {"SLURM_PROCID=1", "SLURM_NTASKS=2", "HOME=" + dir.path().string()});
    CHECK(lost.wait(20000) == std::optional<int>(2));
    CHECK(contains(lost.err(), "export TETHER_SECRET=$(tether keygen --secret)"));
    CHECK(contains(lost.err(), "security.insecure"));
}
