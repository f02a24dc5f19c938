// The one verdict (record/run_verdict.hpp) is honest both ways: a run that trained too little of
// its plan fails, and peers that never joined are no worker of the run, so they fail nothing.
#include <doctest/doctest.h>

#include "center_harness.hpp"
#include "cluster/cluster_settings.hpp"
#include "record/learning_verdict.hpp"
#include "record/run_verdict.hpp"

#include <cmath>

using namespace tether::testing;

namespace {

tether::ClusterSettings four_workers() {
    tether::ClusterSettings k;
    k.workers = 4;
    return k;
}

}  // namespace

TEST_CASE("a run that trained less than cluster.min_trained_share of its plan fails, naming both figures") {
    // A lost worker never replaced: three quarters of the samples, no worker counted failed.
    nlohmann::json summary = {{"updates_applied", 100}, {"workers_lost", 0}, {"samples", 750}, {"samples_planned", 1000}};
    tether::judge_run(summary, four_workers(), {});
    CHECK(summary["trained_share"].get<double>() == doctest::Approx(0.75));
    CHECK(summary["run_failed"] == true);
    const std::string reason = summary["failure_reason"];
    CHECK(reason.find("0.750 of the planned samples (750 of 1000)") != std::string::npos);
    CHECK(reason.find("cluster.min_trained_share (0.9)") != std::string::npos);

    nlohmann::json whole = {{"updates_applied", 100}, {"samples", 1000}, {"samples_planned", 1000}};
    tether::judge_run(whole, four_workers(), {});
    CHECK(whole["trained_share"].get<double>() == doctest::Approx(1.0));
    CHECK(whole["run_failed"] == false);

    tether::ClusterSettings lenient = four_workers();
    lenient.min_trained_share = 0.5;
    nlohmann::json partial = {{"updates_applied", 100}, {"samples", 750}, {"samples_planned", 1000}};
    tether::judge_run(partial, lenient, {});
    CHECK(partial["run_failed"] == false);
}

TEST_CASE("without a plan (the embedding API) no trained share is computed") {
    nlohmann::json summary = {{"updates_applied", 100}, {"samples", 10}};
    tether::judge_run(summary, four_workers(), {});
    CHECK_FALSE(summary.contains("trained_share"));
    CHECK(summary["run_failed"] == false);
}

TEST_CASE("peers that said hello and went silent before their welcome are not lost workers") {
    CenterOptions options = options_for(3);
    options.membership.worker_timeout_ms = 300;
    ServedCenter served(kAeasgd, options);
    // Two strangers take places while the run waits for its workers, then say nothing more.
    std::vector<std::unique_ptr<tether::Channel>> strangers;
    for (int i = 0; i < 2; ++i) {
        strangers.push_back(served.connect("stranger-" + std::to_string(i)));
        send(*strangers.back(), header(MessageType::hello, 3), {});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(900));  // past worker_timeout_ms: dropped
    std::vector<std::unique_ptr<tether::Channel>> workers;
    for (int i = 0; i < 3; ++i) {
        workers.push_back(served.connect("worker-" + std::to_string(i)));
        send(*workers.back(), header(MessageType::hello, 3), {});
    }
    Frames frames;
    for (auto& w : workers) receive(*w, MessageType::welcome, frames);
    send(*workers[0], exchange_header(1), {2.f, 0.f, 5.f});
    receive(*workers[0], MessageType::reply, frames);
    for (auto& w : workers) send(*w, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    const auto& stats = served.center().stats();
    CHECK(stats.peers_dropped == 2);
    CHECK(stats.workers_lost == 0);
    CHECK(stats.workers_finished == 3);

    nlohmann::json summary = stats.to_json();
    tether::ClusterSettings k;
    k.workers = 3;
    tether::judge_run(summary, k, {});
    CHECK(summary["failed_workers"] == 0);
    CHECK(summary["run_failed"] == false);
}

TEST_CASE("workers welcomed but lost before their first exchange fail a run only where there is no plan") {
    CenterOptions options = options_for(1);
    options.membership.worker_timeout_ms = 300;
    options.membership.elastic = true;  // an elastic run: anyone who says hello is welcomed
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    std::vector<std::unique_ptr<tether::Channel>> silent;
    for (int i = 0; i < 3; ++i) {  // welcomed, then quiet
        silent.push_back(served.connect("silent-" + std::to_string(i)));
        send(*silent.back(), header(MessageType::hello, 3), {});
        Frames frames;
        receive(*silent.back(), MessageType::welcome, frames);
    }
    Frames frames;
    for (std::uint64_t k = 1; k <= 8; ++k) {  // the real worker goes on past their timeout
        send(*worker, exchange_header(k), {2.f, 0.f, 5.f});
        receive(*worker, MessageType::reply, frames);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    send(*worker, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    const auto& stats = served.center().stats();
    CHECK(stats.workers_silent == 3);
    CHECK(stats.workers_lost == 0);
    CHECK(stats.workers_finished == 1);
    CHECK(stats.live_workers() == 0);

    tether::ClusterSettings one;
    one.workers = 1;
    nlohmann::json planned = stats.to_json();
    planned["samples"] = 1000;
    planned["samples_planned"] = 1000;
    tether::judge_run(planned, one, {});
    CHECK(planned["failed_workers"] == 0);
    CHECK(planned["run_failed"] == false);
    // Without a plan nothing else would notice a worker that died before exchanging: it fails.
    nlohmann::json unplanned = stats.to_json();
    tether::judge_run(unplanned, one, {});
    CHECK(unplanned["failed_workers"] == 1);
    CHECK(unplanned["run_failed"] == true);
}

TEST_CASE("divergence is counted by kind, not by the words of a failure") {
    // A worker whose loss went non-finite, in words of its own; and a crash whose message quotes
    // a divergence it did not have (a user's log line, an assertion's text).
    const std::vector<tether::WorkerFailure> failures = {{0, "loss went nan after 12 steps", true},
                                                         {1, "segfault while printing 'diverged at step 3'", false},
                                                         {2, "diverged at step 9 (loss inf)", true}};
    nlohmann::json summary = {{"updates_applied", 100}, {"workers_lost", 0}};
    tether::judge_run(summary, four_workers(), failures);
    CHECK(summary["failed_workers"] == 3);
    CHECK(summary["diverged_workers"] == 2);
    CHECK(summary["run_failed"] == true);
    const std::string reason = summary["failure_reason"];
    CHECK(reason.find("2 diverged (first: worker 0: loss went nan after 12 steps)") != std::string::npos);
}

// Runs that learned nothing must not report success (a learning rate of 1000 at chance, 32
// ADAG workers ending with a loss far above x~(0)'s, x~ replaced by an unauthenticated peer).
TEST_CASE("a run whose model did not learn fails, naming the rule and its figures, unless asked to warn only") {
    using tether::LearningFacts;
    const auto judged = [](const LearningFacts& facts, bool required) {
        nlohmann::json summary = {{"updates_applied", 100}, {"samples", 1000}, {"samples_planned", 1000}};
        tether::judge_learning(summary, "validation", facts, required);
        tether::judge_run(summary, four_workers(), {});  // keeps the finding
        return summary;
    };
    // Worse than x~(0).
    nlohmann::json worse = judged({2.30, 13.1, 0.288, 0.10}, true);
    CHECK(worse["learned"] == false);
    CHECK(worse["run_failed"] == true);
    CHECK(worse["initial_validation_loss"].get<double>() == doctest::Approx(2.30));
    CHECK(worse["failure_reason"].get<std::string>() ==
          "the model did not learn: final validation loss 13.1 is above the initial 2.3 (x~(0))");
    // At chance: the loss fell (every output equal), the accuracy did not rise.
    nlohmann::json chance = judged({2.59, 2.32, 0.099, 0.108}, true);
    CHECK(chance["run_failed"] == true);
    CHECK(chance["failure_reason"].get<std::string>().find("accuracy 9.90% is no better than chance (10.80%") !=
          std::string::npos);
    // Not finite.
    nlohmann::json nan = judged({2.3, std::nan(""), std::nullopt, 0.1}, true);
    CHECK(nan["failure_reason"].get<std::string>().rfind("x~ is not finite at the end", 0) == 0);
    // Learned: a point above chance and a lower loss.
    nlohmann::json learned = judged({2.3, 0.4, 0.85, 0.10}, true);
    CHECK(learned["learned"] == true);
    CHECK(learned["run_failed"] == false);
    // eval.require_learning false: a warning, and the run is judged on the rest.
    nlohmann::json warned = judged({2.30, 13.1, 0.288, 0.10}, false);
    CHECK(warned["learned"] == false);
    CHECK(warned["run_failed"] == false);
    CHECK(warned["learning_warning"].get<std::string>().find("eval.require_learning is false") != std::string::npos);
    // Nothing to judge (no evaluation): nothing said.
    nlohmann::json unknown = judged({}, true);
    CHECK_FALSE(unknown.contains("learned"));
    CHECK(unknown["run_failed"] == false);
    // Another failure keeps its own reason.
    nlohmann::json lost = {{"updates_applied", 0}};
    tether::judge_learning(lost, "validation", {2.3, 13.1, 0.2, 0.1}, true);
    tether::judge_run(lost, four_workers(), {});
    CHECK(lost["failure_reason"].get<std::string>().rfind("no update reached x~", 0) == 0);
}

TEST_CASE("chance is the largest class's share of the evaluated samples") {
    tether::Dataset data;
    data.labels = {0, 1, 1, 2, 1, 0, 0, 0};
    CHECK(tether::chance_accuracy(data, 0) == doctest::Approx(0.5));
    CHECK(tether::chance_accuracy(data, 5) == doctest::Approx(0.6));  // the first five: three 1s
}
