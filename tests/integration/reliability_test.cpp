// Failures a user meets, through the built `tether` binary on 127.0.0.1: a run whose workers
// all diverge exits 1 and says so; a SIGSTOPped worker does not hang `tether run`; workers of
// a center killed with SIGKILL exit 1 after cluster.center_restart_ms naming its address; a worker
// whose settings differ is refused with the setting named; CURVE runs, and refuses a key that
// is not allowed. Every wait has a deadline (process_support.hpp).
#include <doctest/doctest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "process_support.hpp"
#include "test_support.hpp"

namespace {

using namespace tether::testing;  // Process, TempDir, cluster_config, write_config, read_summary, ...
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Starts `tether run` on a local averaging run of 3 workers (`document` adjusts it), waits for
// training, sends `signal` to one worker process, and returns its exit code (unset: it did not
// end within 120 s) and the seconds from the signal to the end.
struct SignalledRun {
    std::optional<int> exit_code;
    double seconds = 0;
    std::string err;
    json summary;
};
SignalledRun signal_a_worker(TempDir& dir, json document, int signal) {
    const std::string config = write_config(dir, "signalled.json", document), run = dir.file("run");
    Process tether({"run", config, "--out", run}, dir.file("out"), dir.file("err"));
    REQUIRE(wait_for_training(run, 30000, tether));
    std::vector<pid_t> workers;
    const auto found_by = Clock::now() + std::chrono::seconds(10);
    while (workers.size() < 3 && Clock::now() < found_by) workers = children_of(tether.pid());
    REQUIRE(workers.size() == 3);
    REQUIRE(::kill(workers[1], signal) == 0);
    const auto signalled_at = Clock::now();
    SignalledRun r;
    r.exit_code = tether.wait(120000);
    r.seconds = std::chrono::duration<double>(Clock::now() - signalled_at).count();
    r.err = tether.err();
    if (r.exit_code) r.summary = read_summary(run);
    return r;
}

}  // namespace

TEST_CASE("a run whose workers all diverge exits 1 and names the divergence") {
    TempDir dir;
    json document = cluster_config("diverge", "adag", 3);
    document["cluster"]["mode"] = "local";
    document["training"]["optimizer"] = {{"name", "sgd"}, {"learning_rate", 1000}};
    const std::string config = write_config(dir, "diverge.json", document), run = dir.file("run");
    Process tether({"run", config, "--out", run}, dir.file("out"), dir.file("err"));
    const auto exit_code = tether.wait(60000);
    CAPTURE(tether.err());
    REQUIRE(exit_code.has_value());
    CHECK(*exit_code == 1);
    CHECK(contains(tether.err(), "run FAILED"));
    CHECK(contains(tether.err(), "diverged at step"));
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    CHECK(summary["run_failed"] == true);
    CHECK(summary["diverged_workers"] == 3);
    CHECK(summary["failed_workers"] == 3);
    CHECK(contains(summary["failure_reason"].get<std::string>(), "3 of 3 workers failed"));
}

TEST_CASE("a SIGSTOPped worker does not hang tether run: it is lost, the run ends, the worker is ended") {
    TempDir dir;
    json document = cluster_config("stopped", "averaging", 3);
    document["cluster"]["mode"] = "local";
    document["training"]["epochs"] = 30;
    document["eval"]["per_epoch"] = 4;
    const SignalledRun r = signal_a_worker(dir, document, SIGSTOP);
    CAPTURE(r.err);
    REQUIRE_MESSAGE(r.exit_code.has_value(), "tether run did not end within 120 s of the SIGSTOP");
    MESSAGE("tether run ended " << r.seconds << " s after the SIGSTOP, exit code " << *r.exit_code);
    // 1 of 3 failed, within cluster.max_failed_share; but its shard went untrained from then
    // on, so the run trained well under cluster.min_trained_share of its plan: a failed run.
    CHECK(*r.exit_code == 1);
    CHECK(contains(r.err, "run FAILED: the workers trained 0."));
    const json& summary = r.summary;
    CAPTURE(summary.dump(2));
    CHECK(summary["workers_lost"] == 1);
    CHECK(summary["failed_workers"] == 1);
    CHECK(summary["samples_planned"] == 1200 * 30);
    CHECK(summary["trained_share"].get<double>() > 0.6);
    CHECK(summary["trained_share"].get<double>() < 0.9);
    CHECK(summary["run_failed"] == true);
    CHECK(contains(summary["failure_reason"].get<std::string>(), "less than cluster.min_trained_share (0.9)"));
    CHECK(summary["worker_exit_status"][1].is_string());  // ended by a signal
}

TEST_CASE("a worker process killed with SIGKILL is lost at once, naming the signal, not after the worker timeout") {
    // tether run is the worker's parent and learns of its death at once, not after
    // cluster.worker_timeout_ms of silence (here 60 s, which a synchronous round would wait out).
    TempDir dir;
    json document = cluster_config("killed", "averaging", 3);
    document["cluster"]["mode"] = "local";
    document["cluster"]["worker_timeout_ms"] = 60000;
    document["cluster"]["step_delay_ms"] = {10, 10, 10};  // about 4 s of training: the kill lands mid-run
    document["training"]["epochs"] = 30;
    document["eval"]["per_epoch"] = 4;
    const SignalledRun r = signal_a_worker(dir, document, SIGKILL);
    CAPTURE(r.err);
    REQUIRE(r.exit_code.has_value());
    MESSAGE("tether run ended " << r.seconds << " s after the SIGKILL, exit code " << *r.exit_code);
    CHECK(r.seconds < 30);  // the others' remaining epochs; not the 60 s timeout
    CHECK(contains(r.err, "lost: its process was ended by signal 9 (Killed)"));
    const json& summary = r.summary;
    CAPTURE(summary.dump(2));
    CHECK(summary["workers_lost"] == 1);
    CHECK(summary["worker_exit_status"][1] == "signal 9");
}

TEST_CASE("workers of a center killed with SIGKILL exit 1 after the restart window, naming its address") {
    TempDir dir;
    json document = cluster_config("dead-center", "aeasgd", 1);
    document["training"]["epochs"] = 200;
    document["cluster"]["center_restart_ms"] = 3000;  // nobody restarts it: the worker waits this long in all
    const std::string config = write_config(dir, "c.json", document);
    Process server({"server", "--config", config, "--bind", "tcp://127.0.0.1:*", "--out", dir.file("run")},
                   dir.file("s.out"), dir.file("s.err"));
    const std::string address = start_server(server, dir, dir.file("s.out"));
    Process worker({"worker", "--config", config, "--connect", address}, dir.file("w.out"), dir.file("w.err"));
    REQUIRE(wait_for_training(dir.file("run"), 30000, server));
    REQUIRE(::kill(server.pid(), SIGKILL) == 0);
    const auto killed_at = Clock::now();
    const auto exit_code = worker.wait(30000);
    const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
    CAPTURE(worker.err());
    REQUIRE_MESSAGE(exit_code.has_value(), "the worker still waited 30 s after its center died");
    MESSAGE("worker exited " << seconds << " s after the center's SIGKILL (cluster.center_restart_ms 3000)");
    CHECK(*exit_code == 1);
    CHECK(seconds > 2.5);
    CHECK(seconds < 3.0 + 3.0);
    CHECK(contains(worker.err(), address));
    CHECK(contains(worker.err(), "waiting up to 3000 ms in all (cluster.center_restart_ms)"));
    CHECK(contains(worker.err(), "silent"));
}

TEST_CASE("a worker whose settings differ is refused at join, naming the setting and both values") {
    TempDir dir;
    const std::string config = write_config(dir, "c.json", cluster_config("mismatch", "aeasgd", 1));
    Process server({"server", "--config", config, "--bind", "tcp://127.0.0.1:*", "--out", dir.file("run")},
                   dir.file("s.out"), dir.file("s.err"));
    const std::string address = start_server(server, dir, dir.file("s.out"));
    Process other({"worker", "--config", config, "--connect", address, "--set", "strategy.moving_rate=0.5"},
                  dir.file("x.out"), dir.file("x.err"));
    const auto other_exit = other.wait(30000);
    CAPTURE(other.err());
    REQUIRE(other_exit.has_value());
    CHECK(*other_exit == 1);
    CHECK(contains(other.err(), "strategy.moving_rate: center 0.9, worker 0.5"));
    Process wider({"worker", "--config", config, "--connect", address, "--set", "cluster.chunk_elements=100"},
                  dir.file("y.out"), dir.file("y.err"));
    REQUIRE(wider.wait(30000).has_value());
    CAPTURE(wider.err());
    CHECK(contains(wider.err(), "cluster.chunk_elements: center 1048576, worker 100"));
    Process compressing({"worker", "--config", config, "--connect", address, "--set", "cluster.codec=bf16"},
                        dir.file("z.out"), dir.file("z.err"));
    REQUIRE(compressing.wait(30000).has_value());
    CAPTURE(compressing.err());
    CHECK(contains(compressing.err(), "cluster.codec: center \"float32\", worker \"bf16\""));
    // A worker training with another learning rate, batch size or for other epochs trains
    // another run (and its sample counts would be judged against the wrong plan).
    for (const auto& [assignment, expected] : {std::pair<std::string, std::string>{"training.optimizer.learning_rate=0.5", "training.optimizer.learning_rate: center 0.01, worker 0.5"},
                                               {"training.batch_size=7", "training.batch_size: center 16, worker 7"},
                                               {"training.epochs=30", "training.epochs: center 6, worker 30"}}) {
        Process differing({"worker", "--config", config, "--connect", address, "--set", assignment}, dir.file("d.out"),
                          dir.file("d.err"));
        CAPTURE(assignment);
        CHECK(differing.wait(30000) == std::optional<int>(1));
        CAPTURE(differing.err());
        CHECK(contains(differing.err(), expected));
    }
    Process good({"worker", "--config", config, "--connect", address}, dir.file("w.out"), dir.file("w.err"));
    CHECK(good.wait(60000) == std::optional<int>(0));
    CHECK(server.wait(30000) == std::optional<int>(0));
}

TEST_CASE("bad inputs exit 2 at once, naming the key, the file or the path") {
    TempDir dir;
    const std::string config = write_config(dir, "c.json", cluster_config("inputs", "aeasgd", 1));
    const auto refused = [&](const std::vector<std::string>& arguments, const std::string& expected) {
        Process p(arguments, dir.file("p.out"), dir.file("p.err"));
        CAPTURE(expected);
        CHECK(p.wait(20000) == std::optional<int>(2));
        CAPTURE(p.err());
        CHECK(contains(p.err(), expected));
    };
    refused({"run", config, "--set", "training.optimizer.learning_rate=1e999"},
            "training.optimizer.learning_rate: 1e999 is not a number a double can hold");
    tether::testing::write_text(dir.file("huge.json"), R"({"name": "huge", "training": {"epochs": 1e999}})");
    refused({"run", dir.file("huge.json")}, dir.file("huge.json") + ": not valid JSON");
    std::filesystem::create_directories(dir.file("folder"));
    refused({"run", dir.file("folder")}, dir.file("folder") + ": is a directory");
    const std::string file = write_config(dir, "taken.txt", json::object());
    refused({"run", config, "--out", file}, "--out " + file + ": exists and is not a directory");
    refused({"server", "--config", config, "--bind", "tcp://127.0.0.1:*", "--out", file},
            "--out " + file + ": exists and is not a directory");
}

TEST_CASE("CURVE: a secured local run trains; a worker whose key is not allowed is refused at the handshake") {
    TempDir dir;
    Process keygen({"keygen", "--out", dir.file("stranger")}, dir.file("stranger.out"), dir.file("keygen.err"));
    REQUIRE(keygen.wait(10000) == std::optional<int>(0));
    json document = cluster_config("curve", "adag", 2);
    document["security"] = keygen_security(dir);
    document["cluster"]["mode"] = "local";
    const std::string config = write_config(dir, "curve.json", document);
    Process run({"run", config, "--out", dir.file("run")}, dir.file("run.out"), dir.file("run.err"));
    const auto run_exit = run.wait(90000);
    CAPTURE(run.err());
    REQUIRE(run_exit == std::optional<int>(0));
    const json summary = read_summary(dir.file("run"));
    CHECK(summary["security"] == "curve");
    CHECK(summary["final_test_accuracy"].get<double>() >= 0.9);

    document["cluster"]["workers"] = 1;
    const std::string one = write_config(dir, "one.json", document);
    Process server({"server", "--config", one, "--bind", "tcp://127.0.0.1:*", "--out", dir.file("srv")},
                   dir.file("s.out"), dir.file("s.err"));
    const std::string address = start_server(server, dir, dir.file("s.out"));
    Process stranger({"worker", "--config", one, "--connect", address, "--set",
                      "security.worker_public_key=" + dir.file("stranger.pub"), "--set",
                      "security.worker_secret_key=" + dir.file("stranger.key")},
                     dir.file("x.out"), dir.file("x.err"));
    const auto stranger_exit = stranger.wait(30000);
    CAPTURE(stranger.err());
    REQUIRE(stranger_exit.has_value());
    CHECK(*stranger_exit == 1);
    CHECK(contains(stranger.err(), "refused this worker's CURVE key"));
    // A worker that holds another center's public key (a rank given another TETHER_SECRET, or a
    // stale one): the center cannot read its handshake and drops it; both sides say why, at
    // once, instead of the worker waiting out cluster.join_timeout_ms.
    Process other({"worker", "--config", one, "--connect", address, "--set",
                   "security.center_public_key=" + dir.file("stranger.pub")},
                  dir.file("o.out"), dir.file("o.err"));
    const auto other_exit = other.wait(15000);
    CAPTURE(other.err());
    REQUIRE(other_exit.has_value());
    CHECK(*other_exit == 1);
    CHECK(contains(other.err(), "the CURVE keys differ: the center at " + address));
    CHECK(contains(server.err(), "CURVE handshake(s) failed so far: a peer's keys differ"));
    Process worker({"worker", "--config", one, "--connect", address}, dir.file("w.out"), dir.file("w.err"));
    CHECK(worker.wait(60000) == std::optional<int>(0));
    CHECK(server.wait(30000) == std::optional<int>(0));
    const json secured = read_summary(dir.file("srv"));
    CHECK(secured["refused_handshakes"].get<int>() >= 1);
    CHECK(secured["rejected_messages"] == 0);  // the stranger never reached the center's rule
    CHECK(secured["workers_joined"] == 1);
}

TEST_CASE("a center killed with SIGKILL resumes from its checkpoint; its worker rejoins and the run completes") {
    TempDir dir;
    json document = cluster_config("resume", "aeasgd", 2);
    document["training"]["epochs"] = 20;
    document["cluster"]["step_delay_ms"] = {10, 10};  // about 8 s of training: the kill lands mid-run
    document["cluster"]["checkpoint_seconds"] = 1;
    document["cluster"]["worker_timeout_ms"] = 8000;  // the workers wait this long for the center to come back
    document["cluster"]["heartbeat_ms"] = 200;
    const std::string config = write_config(dir, "c.json", document), run = dir.file("run");
    Process server({"server", "--config", config, "--bind", "tcp://127.0.0.1:*", "--out", run}, dir.file("s.out"),
                   dir.file("s.err"));
    const std::string address = start_server(server, dir, dir.file("s.out"));
    Process first({"worker", "--config", config, "--connect", address}, dir.file("w0.out"), dir.file("w0.err"));
    Process second({"worker", "--config", config, "--connect", address}, dir.file("w1.out"), dir.file("w1.err"));
    const std::string checkpoint = run + "/checkpoint.bin";
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (!(std::filesystem::exists(checkpoint) && checkpoint_version(checkpoint) > 0) && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE_MESSAGE(std::filesystem::exists(checkpoint), "no checkpoint within 30 s");
    // Half a checkpoint period later: x~ has gained updates the checkpoint does not hold.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    REQUIRE(::kill(server.pid(), SIGKILL) == 0);
    REQUIRE(server.wait(5000).has_value());
    const std::uint64_t saved = checkpoint_version(checkpoint);
    CHECK(saved > 0);

    Process resumed({"server", "--resume", run, "--bind", address}, dir.file("r.out"), dir.file("r.err"));
    const std::string line = wait_for_line(dir.file("r.out"), "resumed from", 20000, resumed);
    CAPTURE(resumed.err());
    REQUIRE(!line.empty());
    CHECK(contains(line, "at center version " + std::to_string(saved) + " "));  // x~ restored at the checkpoint's version
    // ... and says how old that is: what x~ gained since is lost.
    CHECK(contains(line, " s ago: what x~ gained after it is lost)"));
    const auto first_exit = first.wait(120000), second_exit = second.wait(30000), resumed_exit = resumed.wait(30000);
    CAPTURE(first.err());
    CAPTURE(second.err());
    REQUIRE(first_exit.has_value());
    REQUIRE(second_exit.has_value());
    REQUIRE(resumed_exit.has_value());
    CHECK(*first_exit == 0);
    CHECK(*second_exit == 0);
    CHECK(*resumed_exit == 0);
    CHECK(contains(first.err() + second.err(), "joining again"));
    const json summary = read_summary(run);
    CAPTURE(summary.dump(2));
    MESSAGE("checkpoint at version " << saved << " restored; the resumed run ended at version "
                                      << summary["center_version"] << ", test accuracy " << summary["final_test_accuracy"]);
    CHECK(summary["center_version"].get<std::uint64_t>() > saved);
    CHECK(summary["workers_finished"] == 2);
    CHECK(summary["run_failed"] == false);
    CHECK(summary["final_test_accuracy"].get<double>() >= 0.9);
    CHECK(checkpoint_version(checkpoint) == summary["center_version"].get<std::uint64_t>());
    // What the resume rolled back, as the rejoining workers told it.
    CHECK(summary["resumed_at_version"] == saved);
    CHECK(summary["rolled_back_updates"].get<std::uint64_t>() > 0);
    CHECK(summary["rolled_back_seconds"].get<double>() > 0.0);
}

TEST_CASE("tether run --resume goes on from the run directory's checkpoint; a finished run has nothing left to train") {
    TempDir dir;
    const std::string config = write_config(dir, "c.json", cluster_config("again", "downpour", 2)), run = dir.file("run");
    Process first({"run", config, "--out", run}, dir.file("1.out"), dir.file("1.err"));
    REQUIRE(first.wait(60000) == std::optional<int>(0));
    const std::uint64_t saved = checkpoint_version(run + "/checkpoint.bin");
    CHECK(saved == read_summary(run)["center_version"].get<std::uint64_t>());  // the final checkpoint
    Process again({"run", "--resume", run}, dir.file("2.out"), dir.file("2.err"));
    const auto exit_code = again.wait(60000);
    CAPTURE(again.err());
    REQUIRE(exit_code == std::optional<int>(0));
    CHECK(contains(again.out(), "resumed from " + run + "/checkpoint.bin at center version " + std::to_string(saved) + " "));
    // Every place trained its whole shard in the first run: the resumed workers are told so in
    // their welcome and train nothing again (it trained the whole plan a second time before).
    CHECK(contains(again.err(), "its place has trained"));
    const json summary = read_summary(run);
    CHECK(summary["center_version"].get<std::uint64_t>() == saved);
    CHECK(summary["samples"] == summary["samples_planned"]);
    CHECK(checkpoint_version(run + "/checkpoint.bin") == saved);
}
