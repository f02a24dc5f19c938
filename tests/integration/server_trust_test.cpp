// The servers of a sharded center (cluster.servers) trust server 0 only.
// A stranger's 26 raw hellos to server 1 of a local run without keys, sent while it trains, take
// no worker's id and join nothing (before: they evicted a real worker and their exchanges were
// applied); and with CURVE, a peer holding an allowed key can neither take an id at a `--server
// 1/2` process nor make it leave with a request for the final x~ (before: it left, and server 0
// exited 1 without a summary).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "process_support.hpp"
#include "stranger.hpp"
#include "test_support.hpp"
#include "transport/curve_keys.hpp"

namespace {

using namespace tether::testing;
using nlohmann::json;
using tether::Header;
using tether::MessageType;

json trained_config(const std::string& name) {
    json document = cluster_config(name, "adag", 2);
    document["cluster"]["servers"] = 2;
    document["data"]["validation_samples"] = 0;
    document["training"]["epochs"] = 30;
    // 2 ms a step: a few seconds of training, long enough for what a stranger tries to land.
    document["cluster"]["step_delay_ms"] = {2, 2};
    return document;
}

// What server 1 of `document` checks in a hello: its fingerprint (public: computed from the
// config) and the parameter count of its server range.
CenterFacts server_1_facts(const json& document) {
    const tether::RunConfig config = tether::parse_config(document);
    const tether::TrainTestSplit data = tether::load_data(config.data, std::uint64_t(config.training.seed));
    const tether::ModelIdentity identity = tether::model_identity(config, *data.train);
    return {identity.servers.at(1).fingerprint, identity.servers.at(1).range.count};
}

// Says hello to server 1 as worker `id` and returns what it answered: "welcome", or the error's text.
std::string hello_as(Stranger& stranger, const CenterFacts& facts, std::uint32_t id) {
    Header h;
    h.type = MessageType::hello;
    h.worker_id = id;
    h.element_count = facts.parameters;
    h.fingerprint = facts.fingerprint;
    stranger.send(h);
    std::string text;
    const auto answer = stranger.receive(5000, &text);
    if (!answer) return "no answer";
    return answer->type == MessageType::welcome ? "welcome" : text;
}

}  // namespace

TEST_CASE("26 raw hellos to server 1 of a local run take no worker's id and join nothing") {
    TempDir dir;
    const std::string a0 = "tcp://127.0.0.1:" + std::to_string(free_port());
    const std::string a1 = "tcp://127.0.0.1:" + std::to_string(free_port());
    json document = trained_config("hellos");
    document["cluster"]["mode"] = "local";
    document["cluster"]["endpoint"] = a0 + "," + a1;
    document["security"]["insecure"] = true;  // no keys: any user of the host reaches both servers
    const std::string config = write_config(dir, "c.json", document);
    const CenterFacts facts = server_1_facts(document);
    zmq::context_t context;
    Process run({"run", config, "--out", dir.file("run")}, dir.file("out"), dir.file("err"));
    REQUIRE(wait_for_training(dir.file("run"), 60000, run));
    std::vector<std::string> answers;
    for (std::uint32_t id = 0; id < 26; ++id) {
        Stranger stranger(context, a1, "stranger-" + std::to_string(id));
        answers.push_back(hello_as(stranger, facts, id % 2));  // each real worker's id, 13 times
    }
    const auto exit_code = run.wait(120000);
    CAPTURE(run.err());
    REQUIRE(exit_code == std::optional<int>(0));
    for (const std::string& answer : answers) {
        CAPTURE(answer);
        CHECK(answer.rfind("no token: ", 0) == 0);
    }
    const json summary = read_summary(dir.file("run"));
    CAPTURE(summary.dump(2));
    CHECK(summary["worker_exit_status"] == json::array({0, 0}));
    CHECK(summary["workers_lost"] == 0);
    CHECK(summary["rejected_by_reason"]["no token"] == 26);
    // Every exchange either server applied was a real worker's: both servers moved together.
    CHECK(summary["server_versions"][1] == summary["server_versions"][0]);
    CHECK(summary["server_versions"][0] == summary["center_version"]);
}

TEST_CASE("an insider's hello and final request to a --server 1/2 process neither take an id nor end it") {
    TempDir dir;
    json document = trained_config("insider");
    document["security"] = keygen_security(dir);
    const std::string config = write_config(dir, "c.json", document);
    Process second({"server", "--config", config, "--server", "1/2", "--bind", "tcp://127.0.0.1:*", "--out", dir.file("s1")},
                   dir.file("s1.out"), dir.file("s1.err"));
    const std::string a1 = listening_addresses(second, dir.file("s1.out"));
    Process first({"server", "--config", config, "--server", "0/2", "--bind", "tcp://127.0.0.1:*", "--other-servers", a1,
                   "--out", dir.file("s0")},
                  dir.file("s0.out"), dir.file("s0.err"));
    const std::string a0 = listening_addresses(first, dir.file("s0.out"));
    Process w0({"worker", "--config", config, "--connect", a0 + "," + a1}, dir.file("w0.out"), dir.file("w0.err"));
    Process w1({"worker", "--config", config, "--connect", a0 + "," + a1}, dir.file("w1.out"), dir.file("w1.err"));
    REQUIRE(wait_for_training(dir.file("s0"), 60000, first));
    // The insider holds the workers' allowed key pair, as any of the run's workers does.
    const auto key = [&](const std::string& name) { return tether::read_curve_key(dir.file(name), name); };
    zmq::context_t context;
    Stranger insider(context, a1, "insider", 1000, {key("center.pub"), key("worker.pub"), key("worker.key")});
    const CenterFacts facts = server_1_facts(document);
    const std::string taken = hello_as(insider, facts, 0);
    Header request;
    request.type = MessageType::snapshot;
    request.flags = tether::kFlagFinal;
    request.fingerprint = facts.fingerprint;
    insider.send(request);  // before the change: answered when the workers finish, and server 1 left
    std::string refusal;
    const auto answer = insider.receive(5000, &refusal);
    const auto w0_exit = w0.wait(90000), w1_exit = w1.wait(30000);
    const auto first_exit = first.wait(30000), second_exit = second.wait(30000);
    CAPTURE(w0.err());
    CAPTURE(w1.err());
    CAPTURE(first.err());
    CAPTURE(second.err());
    CHECK(taken.rfind("no token: ", 0) == 0);
    REQUIRE(answer.has_value());
    CHECK(answer->type == MessageType::error);
    CHECK(refusal.rfind("bad token: ", 0) == 0);
    CHECK(w0_exit == std::optional<int>(0));
    CHECK(w1_exit == std::optional<int>(0));
    CHECK(first_exit == std::optional<int>(0));
    CHECK(second_exit == std::optional<int>(0));
    const json lead = read_summary(dir.file("s0")), other = read_summary(dir.file("s1"));
    CAPTURE(other.dump(2));
    CHECK(lead["final_test_accuracy"].get<double>() >= 0.9);
    CHECK(other["workers_lost"] == 0);
    CHECK(other["workers_finished"] == 2);
    CHECK(other["center_version"] == lead["center_version"]);
}
