// Dean et al.'s warmstart (cluster.warmstart_samples): worker 0 trains alone first; the other
// workers are held at their welcome until the center has counted that many samples, and then
// start from the x~ of that moment. The center side over a raw channel, and the worker side
// (a held worker waits past its join timeout) through the embedding API.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "center_harness.hpp"

using namespace tether::testing;

namespace {

CenterOptions warmstart_options(std::uint64_t samples) {
    CenterOptions o = options_for(2);
    o.membership.warmstart_samples = samples;
    return o;
}

// An exchange of x_i = (2, 0, 5) claiming `samples` in all.
void exchange(Channel& worker, std::uint64_t sequence, std::uint64_t version, std::uint64_t samples) {
    Header h = exchange_header(sequence);
    h.center_version = version;
    h.samples = samples;
    send(worker, h, {2.f, 0.f, 5.f});
    Frames frames;
    CHECK(receive(worker, MessageType::reply, frames).sequence == sequence);
}

// The held worker asks whether it may start: the answer is a heartbeat, with kFlagHeld while held.
bool held(Channel& worker) {
    send(worker, header(MessageType::heartbeat), {});
    Frames frames;
    const Header h = receive(worker, MessageType::heartbeat, frames);
    return (h.flags & tether::kFlagHeld) != 0;
}

// Two hellos on two connections may arrive in either order; the center's answer to a heartbeat
// of the first says its hello was taken (id 0) before the second is sent.
void hello_in_order(Channel& first, Channel& second) {
    send(first, header(MessageType::hello, 3), {});
    send(first, header(MessageType::heartbeat), {});
    Frames frames;
    receive(first, MessageType::heartbeat, frames);
    send(second, header(MessageType::hello, 3), {});
}

}  // namespace

TEST_CASE("warmstart: the others are held, told so, and welcomed with the x~ worker 0 trained") {
    ServedCenter served(kAeasgd, warmstart_options(100));
    auto first = served.connect("worker-a");
    auto second = served.connect("worker-b");
    hello_in_order(*first, *second);
    Frames frames;
    const Header welcome_a = receive(*first, MessageType::welcome, frames);
    CHECK(welcome_a.worker_id == 0);
    CHECK(floats_of(frames) == kInitial);
    // Worker 1 gets no welcome but a heartbeat that says it is held (its join timeout restarts).
    const Header hold = receive(*second, MessageType::heartbeat, frames);
    CHECK(hold.worker_id == 1);
    CHECK((hold.flags & tether::kFlagHeld) != 0);
    // Still held after 64 samples; its exchange is refused, not applied.
    exchange(*first, 1, 0, 64);
    CHECK(held(*second));
    CHECK(starts_with(rejection(*second, tether::encode(exchange_header(1)), {9.f, 9.f, 9.f}), "not welcomed"));
    // 128 samples >= 100: worker 1 is welcomed with x~ after worker 0's two updates (aeasgd,
    // moving rate 0.25, x_i = (2, 0, 5) both times), not with x~(0).
    exchange(*first, 2, 1, 128);
    const Header welcome_b = receive(*second, MessageType::welcome, frames);
    CHECK(welcome_b.worker_id == 1);
    CHECK(welcome_b.center_version == 2);
    check_equal(floats_of(frames), {1.4375f, -0.5625f, 2.46875f});

    send(*first, header(MessageType::bye), {});
    send(*second, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().workers_finished == 2);
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::not_welcomed) == 1);
}

TEST_CASE("warmstart: when worker 0 is lost before the warmstart ends, the held workers start anyway") {
    CenterOptions options = warmstart_options(1000);
    options.membership.worker_timeout_ms = 400;
    ServedCenter served(kAeasgd, options);
    auto first = served.connect("worker-a");
    auto second = served.connect("worker-b");
    hello_in_order(*first, *second);
    Frames frames;
    receive(*first, MessageType::welcome, frames);
    receive(*second, MessageType::heartbeat, frames);
    exchange(*first, 1, 0, 64);
    // Worker 0 goes silent; worker 1 keeps saying it is alive and is welcomed once 0 is lost.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool welcomed = false;
    while (!welcomed && std::chrono::steady_clock::now() < deadline) {
        send(*second, header(MessageType::heartbeat), {});
        while (second->receive(frames, 100)) {
            tether::ErrorCode reason = tether::ErrorCode::none;
            const auto h = tether::decode(frames.header.data(), frames.header.size(), reason);
            REQUIRE(h.has_value());
            if (h->type == MessageType::welcome) {
                welcomed = true;
                CHECK(h->worker_id == 1);
                check_equal(floats_of(frames), {1.25f, -0.75f, 1.625f});  // x~ after worker 0's one update
                break;
            }
        }
    }
    CHECK(welcomed);
    send(*second, header(MessageType::bye), {});
    CHECK(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().stats().workers_lost == 1);
    CHECK(served.center().stats().workers_finished == 1);
}

TEST_CASE("warmstart is refused with a synchronous strategy, whose rounds would wait for the held workers") {
    const nlohmann::json averaging = {{"name", "averaging"}, {"communication_window", 1}};
    CHECK_THROWS_WITH_AS(ServedCenter(averaging, warmstart_options(100)),
                         doctest::Contains("cluster.warmstart_samples: 100 with a synchronous strategy"), tether::ConfigError);
}

TEST_CASE("warmstart through the embedding API: a held worker's join outlasts its join timeout and starts from x~") {
    tether::ServiceOptions o;
    o.strategy = R"({"name": "downpour", "communication_window": 1})";
    o.workers = 2;
    o.join_timeout_ms = 300;  // the warmstart below takes longer: a held worker must not give up
    o.warmstart_samples = 20;
    o.heartbeat_ms = 50;
    o.worker_timeout_ms = 5000;
    auto center = tether::CenterService::start({0.f, 0.f}, o);
    // Two workers join at once; whichever gets id 0 trains alone: 20 steps of one sample, 40 ms
    // each (0.8 s, each adding 1 to x~ through downpour's update); the other is held meanwhile.
    std::vector<std::vector<float>> x(2, std::vector<float>(2, 0.f));
    std::vector<double> joined_after(2, 0), x_at_join(2, 0);
    std::vector<unsigned> id(2, 0);
    std::vector<std::string> error(2);
    std::vector<std::thread> threads;
    for (int k = 0; k < 2; ++k)
        threads.emplace_back([&, k] {
            try {
                const auto t0 = std::chrono::steady_clock::now();
                auto worker = center->connect_worker({{x[k].data(), 2}});
                joined_after[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                x_at_join[k] = x[k][0];
                id[k] = worker->id();
                for (int step = 0; id[k] == 0 && step < 20; ++step) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(40));
                    for (float& v : x[k]) v += 1.f;
                    worker->step(1);
                }
                worker->finish();
            } catch (const std::exception& e) {
                error[k] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : error) CHECK_MESSAGE(e.empty(), e);
    const int held = id[0] == 0 ? 1 : 0;
    CHECK(id[held] == 1);
    // The held worker waited through the warmstart (past its 300 ms join timeout) and started
    // from the x~ worker 0 had trained, not from x~(0).
    CHECK(joined_after[held] > 0.5);
    CHECK(x_at_join[held] >= 19.0);
    CHECK(x_at_join[1 - held] == 0.0);
    center->wait();
}
