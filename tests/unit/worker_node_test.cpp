// The worker side of the protocol against a hand-written center (a raw Endpoint over
// inproc://): hello/welcome, an exchange every communication window plus one after the last
// step, heartbeats in between, the version it last pulled in every header, bye at the end;
// and a clear failure, never a hang, when the center refuses it or is not there.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "fake_center.hpp"
#include "protocol/header.hpp"
#include "strategy/configured_strategy.hpp"
#include "test_support.hpp"
#include "train/local_trainer.hpp"
#include "transport/transport.hpp"
#include "worker/worker_node.hpp"

namespace {

using nlohmann::json;
using namespace tether::testing;  // FakeCenter, kFingerprint, unique_inproc

tether::WorkerOptions worker_options(const std::string& address) {
    tether::WorkerOptions o;
    o.fingerprint = kFingerprint;
    o.join_timeout_ms = 5000;
    o.reply_timeout_ms = 5000;
    o.server_address = address;
    return o;
}

std::string failure_of(std::future<void>& f) {
    try {
        f.get();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

using tether::testing::contains;

std::size_t count_of(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("join: hello carries the parameter count; the welcome gives id, version and x~") {
    FakeCenter center;
    const std::string address = center.endpoint->address();
    tether::WorkerNode node(center.transport->connect(address, "w", {}), worker_options(address), 3);
    auto joined = std::async(std::launch::async, [&] { return node.join(); });
    const auto hello = center.receive();
    CHECK(hello.header.type == MessageType::hello);
    CHECK(hello.header.element_count == 3);
    CHECK(hello.header.fingerprint == kFingerprint);
    CHECK(hello.frames.payload.empty());
    Header welcome;
    welcome.type = MessageType::welcome;
    welcome.dtype = Dtype::float32;
    welcome.worker_id = 5;
    welcome.center_version = 7;
    welcome.element_count = 3;
    welcome.fingerprint = kFingerprint;
    const std::vector<float> x{1.f, 2.f, 3.f};
    center.endpoint->send(hello.peer, tether::encode(welcome), x.data(), sizeof(float) * 3);
    const tether::Welcome w = joined.get();
    CHECK(w.worker_id == 5);
    CHECK(w.version == 7);
    CHECK(w.center == x);
}

TEST_CASE("join fails with the center's reason, on a fingerprint mismatch, and on a timeout") {
    SUBCASE("the center's error text reaches the worker's exception") {
        FakeCenter center;
        const std::string address = center.endpoint->address();
        tether::WorkerNode node(center.transport->connect(address, "w", {}), worker_options(address), 3);
        auto joined = std::async(std::launch::async, [&] { node.join(); });
        const auto hello = center.receive();
        center.send_error(hello.peer, tether::ErrorCode::wrong_count, "wrong count: worker has 3 parameters, center 4");
        const std::string error = failure_of(joined);
        CHECK(contains(error, "rejected"));
        CHECK(contains(error, "wrong count: worker has 3 parameters, center 4"));
    }
    SUBCASE("a welcome for another model") {
        FakeCenter center;
        const std::string address = center.endpoint->address();
        tether::WorkerNode node(center.transport->connect(address, "w", {}), worker_options(address), 3);
        auto joined = std::async(std::launch::async, [&] { node.join(); });
        const auto hello = center.receive();
        center.send(hello.peer, MessageType::welcome, 0, {1.f, 2.f, 3.f}, 0, kFingerprint + 1);
        CHECK(contains(failure_of(joined), "fingerprint"));
    }
    SUBCASE("nobody answers: a timeout naming the address, not a hang") {
        auto transport = tether::make_zmq_transport();
        const std::string address = unique_inproc();  // nothing binds it
        tether::WorkerOptions options = worker_options(address);
        options.join_timeout_ms = 300;
        tether::WorkerNode node(transport->connect(address, "w", {}), options, 3);
        const auto started = std::chrono::steady_clock::now();
        tether::testing::TempDir dir;
        tether::testing::StderrCapture quiet(dir.file("stderr.txt"));  // the "still waiting" lines
        auto joined = std::async(std::launch::async, [&] { node.join(); });
        REQUIRE(joined.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
        const std::string error = failure_of(joined);
        quiet.text();
        CHECK(contains(error, "no welcome"));
        CHECK(contains(error, address));
        CHECK(contains(error, "300 ms"));
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    }
}

TEST_CASE("train: an exchange every window and after the last step, heartbeats between, then bye") {
    // 50 samples, batch 10: 5 steps an epoch; 2 epochs = 10 steps; window 3 -> exchanges after
    // steps 3, 6, 9 and, at finish(), 10 (no local work is lost); heartbeats after the other 7.
    const json document = json::parse(R"({
        "data": {"source": "synthetic", "train_samples": 50, "test_samples": 10, "features": 4, "classes": 2},
        "model": {"hidden_layers": [4]},
        "training": {"epochs": 2, "batch_size": 10, "device": "cpu", "threads": 1,
                     "optimizer": {"name": "sgd", "learning_rate": 0.1}},
        "strategy": {"name": "aeasgd", "communication_window": 3, "moving_rate": 0.5}
    })");
    const tether::RunConfig config = tether::parse_config(document);
    tether::SyntheticSpec spec;
    spec.train_samples = 50;
    spec.test_samples = 10;
    spec.features = 4;
    spec.classes = 2;
    const auto data = tether::make_synthetic(spec);
    auto backend = tether::make_backend({"cpu", 1, 0});
    tether::LocalTrainer trainer(config, *backend, tether::DatasetView::whole(data.train), 1);
    const std::size_t n = trainer.num_parameters();
    REQUIRE(trainer.steps_per_epoch() == 5);

    FakeCenter center;
    const std::string address = center.endpoint->address();
    tether::WorkerOptions options = worker_options(address);
    options.epochs = 2;
    options.communication_window = 3;
    options.heartbeat_ms = 0;  // a heartbeat after every step that does not exchange
    tether::WorkerNode node(center.transport->connect(address, "w", {}), options, n);
    auto rule = config.cluster.strategy->make_worker_rule({1, n});
    std::vector<float> x0(n, 0.25f);
    auto trained = std::async(std::launch::async, [&] {
        const tether::Welcome welcome = node.join();
        return node.train(trainer, std::move(rule), welcome);
    });

    const auto hello = center.receive();
    REQUIRE(hello.header.type == MessageType::hello);
    std::uint64_t version = 10;
    center.send(hello.peer, MessageType::welcome, version, x0);

    std::vector<std::uint64_t> exchange_steps, sequences, pulled_versions;
    int heartbeats = 0;
    Header bye;
    for (bool done = false; !done;) {
        const auto m = center.receive();
        switch (m.header.type) {
            case MessageType::exchange:
                CHECK(m.header.dtype == Dtype::float32);
                CHECK(m.header.element_count == n);
                CHECK(m.frames.payload.size() == n * sizeof(float));
                exchange_steps.push_back(m.header.local_step);
                sequences.push_back(m.header.sequence);
                pulled_versions.push_back(m.header.center_version);
                // e = 0: the worker keeps its x_i; the center's version moves on.
                center.send(m.peer, MessageType::reply, ++version, std::vector<float>(n, 0.f), m.header.sequence);
                break;
            case MessageType::heartbeat: ++heartbeats; break;
            case MessageType::bye:
                bye = m.header;
                done = true;
                break;
            default: FAIL("unexpected message type"); done = true;
        }
    }
    REQUIRE(trained.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    const tether::WorkerResult result = trained.get();
    CHECK(exchange_steps == std::vector<std::uint64_t>{3, 6, 9, 10});
    CHECK(sequences == std::vector<std::uint64_t>{1, 2, 3, 4});
    CHECK(pulled_versions == std::vector<std::uint64_t>{10, 11, 12, 13});  // the version of the last pull
    CHECK(heartbeats == 7);
    CHECK(bye.local_step == 10);
    CHECK(bye.samples == 100);
    CHECK(result.exchanges == 4);
    CHECK(result.steps == 10);
    CHECK(result.samples == 100);
    CHECK(result.bytes_sent > 0);
    CHECK(result.bytes_received > 0);
}

TEST_CASE("train stops with the center's reason when an exchange is refused") {
    const json document = json::parse(R"({
        "data": {"source": "synthetic", "train_samples": 20, "test_samples": 10, "features": 4, "classes": 2},
        "model": {"hidden_layers": [4]},
        "training": {"epochs": 1, "batch_size": 10, "device": "cpu", "threads": 1},
        "strategy": {"name": "downpour", "communication_window": 1}
    })");
    const tether::RunConfig config = tether::parse_config(document);
    tether::SyntheticSpec spec;
    spec.train_samples = 20;
    spec.features = 4;
    spec.classes = 2;
    const auto data = tether::make_synthetic(spec);
    auto backend = tether::make_backend({"cpu", 1, 0});
    tether::LocalTrainer trainer(config, *backend, tether::DatasetView::whole(data.train), 1);
    const std::size_t n = trainer.num_parameters();

    FakeCenter center;
    const std::string address = center.endpoint->address();
    tether::WorkerOptions options = worker_options(address);
    options.heartbeat_ms = 100000;
    tether::WorkerNode node(center.transport->connect(address, "w", {}), options, n);
    auto rule = config.cluster.strategy->make_worker_rule({1, n});
    auto trained = std::async(std::launch::async, [&] {
        const tether::Welcome welcome = node.join();
        node.train(trainer, std::move(rule), welcome);
    });
    const auto hello = center.receive();
    center.send(hello.peer, MessageType::welcome, 0, std::vector<float>(n, 0.f));
    const auto exchange = center.receive();
    REQUIRE(exchange.header.type == MessageType::exchange);
    center.send_error(exchange.peer, tether::ErrorCode::non_finite_payload, "non-finite payload: the exchange holds NaN or Inf");
    REQUIRE(trained.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    CHECK(contains(failure_of(trained), "non-finite payload: the exchange holds NaN or Inf"));
}

// The "still waiting" message is for once per 5 s of waiting, not a spin near the deadline.
TEST_CASE("waiting for a welcome does not spin printing \"still waiting\"") {
    tether::testing::TempDir dir;
    auto transport = tether::make_zmq_transport();
    const std::string address = unique_inproc();  // nothing binds it
    tether::WorkerOptions options = worker_options(address);
    options.join_timeout_ms = 300;
    tether::WorkerNode node(transport->connect(address, "w", {}), options, 3);
    tether::testing::StderrCapture capture(dir.file("stderr.txt"));
    std::string error;
    try {
        node.join();
    } catch (const std::runtime_error& e) {
        error = e.what();
    }
    const std::string printed = capture.text();
    CHECK(contains(error, "no welcome"));
    const std::size_t lines = count_of(printed, "still waiting");
    CAPTURE(lines);
    CHECK(lines <= 1);
}
