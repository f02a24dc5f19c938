// Model buffers through the embedding API (include/tether/tether.hpp): workers' buffers reach
// b~ as their mean, replies leave them alone, a joiner starts from b~, the count is an agreed
// setting, and bad buffers are refused by name.
#include <doctest/doctest.h>

#include <tether/tether.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using tether::testing::contains;
using Vec = std::vector<float>;

tether::ServiceOptions options_for(int workers) {
    tether::ServiceOptions o;
    o.strategy = R"({"name": "downpour", "communication_window": 1})";
    o.workers = workers;
    o.join_timeout_ms = 10000;
    return o;
}

// One worker's parameters (2 tensors) and buffers (2 tensors: 2 + 1 elements).
struct Model {
    Vec w = Vec(3), b = Vec(1), running_mean = Vec(2), counter = Vec(1);
    std::vector<tether::ParameterSpan> parameters() { return {{w.data(), 3}, {b.data(), 1}}; }
    std::vector<tether::ParameterSpan> buffers() { return {{running_mean.data(), 2}, {counter.data(), 1}}; }
    Vec buffer_values() const { return {running_mean[0], running_mean[1], counter[0]}; }
    void set_buffers(float m0, float m1, float c) { running_mean = {m0, m1}, counter = {c}; }
};

void wait_for_finished(tether::CenterService& center, int finished) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (nlohmann::json::parse(center.stats_json())["workers_finished"].get<int>() < finished &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Two workers joined (connect blocks until both have): each gets b~(0).
std::vector<std::unique_ptr<tether::WorkerClient>> join_two(tether::CenterService& center, Model* models) {
    std::vector<std::unique_ptr<tether::WorkerClient>> workers(2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
        threads.emplace_back([&, i] {
            workers[std::size_t(i)] = center.connect_worker(models[i].parameters(), tether::Memory::host, models[i].buffers());
        });
    for (auto& t : threads) t.join();
    return workers;
}

}  // namespace

TEST_CASE("b~ is the mean of the workers' buffers; replies leave buffers alone; a joiner starts from b~") {
    // One server with float32, and two servers with a lossy codec: buffers live on server 0
    // and travel float32 either way, so the means are exact.
    for (const auto& [servers, codec] : std::vector<std::pair<int, std::string>>{{1, "float32"}, {2, "int8"}}) {
        CAPTURE(servers);
        CAPTURE(codec);
        tether::ServiceOptions o = options_for(2);
        o.servers = servers;
        o.codec = codec;
        const Vec b0{0.f, 1.f, 0.f};
        auto center = tether::CenterService::start(Vec(4, 0.f), o, b0);
        Model models[2];
        models[0].set_buffers(9.f, 9.f, 9.f);  // overwritten by b~(0) on joining
        auto workers = join_two(*center, models);
        CHECK(models[0].buffer_values() == b0);
        CHECK(center->snapshot().buffers == b0);

        models[0].set_buffers(1.f, 3.f, 10.f);
        models[1].set_buffers(3.f, 7.f, 20.f);
        CHECK(workers[0]->step(1));
        CHECK(workers[1]->step(1));
        CHECK(center->snapshot().buffers == Vec{2.f, 5.f, 15.f});
        CHECK(models[0].buffer_values() == Vec{1.f, 3.f, 10.f});  // its own running statistics, untouched by the reply
        models[0].set_buffers(5.f, 3.f, 30.f);
        CHECK(workers[0]->step(1));  // worker 0 twice, worker 1 once: each counts once
        CHECK(center->snapshot().buffers == Vec{4.f, 5.f, 25.f});
        workers[0]->finish();
        wait_for_finished(*center, 1);  // its bye and the next hello come over two sockets

        // A worker taking the finished one's place (and id) starts from b~ and replaces its share.
        Model joiner;
        auto third = center->connect_worker(joiner.parameters(), tether::Memory::host, joiner.buffers());
        CHECK(third->id() == workers[0]->id());  // the two hellos are not ordered: either may hold id 0
        CHECK(joiner.buffer_values() == Vec{4.f, 5.f, 25.f});
        joiner.set_buffers(1.f, 1.f, 40.f);
        CHECK(third->step(1));
        third->finish();
        workers[1]->finish();
        const tether::CenterSnapshot final_state = center->wait_state();
        CHECK(final_state.buffers == Vec{2.f, 4.f, 30.f});
        CHECK(final_state.version == 4);
    }
}

TEST_CASE("a worker with other buffers is refused naming the setting; bad buffers are refused before joining") {
    auto center = tether::CenterService::start(Vec(4, 0.f), options_for(1), Vec(3, 0.f));
    Model m;
    auto settings_refusal = [&](std::vector<tether::ParameterSpan> buffers) {
        try {
            center->connect_worker(m.parameters(), tether::Memory::host, std::move(buffers));
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(contains(settings_refusal({{m.running_mean.data(), 2}}), "settings differ: model.buffers: center 3, worker 2"));
    CHECK(contains(settings_refusal({}), "settings differ: model.buffers: center 3, worker 0"));
    CHECK(contains(settings_refusal({{m.w.data() + 1, 3}}), "parameter buffer 0 and model buffer 0 overlap in memory"));
    CHECK(contains(settings_refusal({{m.running_mean.data(), 2}, {nullptr, 1}}), "model buffer 1: a null pointer"));

    // A center without buffers refuses a worker with some, the same way.
    auto plain = tether::CenterService::start(Vec(4, 0.f), options_for(1));
    try {
        plain->connect_worker(m.parameters(), tether::Memory::host, m.buffers());
        FAIL("a worker with buffers joined a center without");
    } catch (const std::runtime_error& e) {
        CHECK(contains(e.what(), "settings differ: model.buffers: center 0, worker 3"));
    }
    // The refused ones took no place.
    auto worker = center->connect_worker(m.parameters(), tether::Memory::host, m.buffers());
    worker->step(1);  // one update reaches x~: a run that trained nothing fails its wait()
    worker->finish();
    center->wait();
    auto plain_worker = plain->connect_worker(m.parameters());
    plain_worker->step(1);
    plain_worker->finish();
    plain->wait();
}

TEST_CASE("a worker whose buffers turn NaN stops naming them; b~ keeps its last finite buffers") {
    tether::ServiceOptions o = options_for(1);
    o.worker_timeout_ms = 600;  // the diverged worker never says bye: it is counted lost
    o.heartbeat_ms = 150;
    auto center = tether::CenterService::start(Vec(4, 0.f), o, Vec(3, 0.f));
    {
        Model m;
        auto worker = center->connect_worker(m.parameters(), tether::Memory::host, m.buffers());
        m.set_buffers(1.f, 2.f, 3.f);
        CHECK(worker->step(1));
        m.running_mean[1] = std::numeric_limits<float>::infinity();
        CHECK_THROWS_WITH(worker->step(1), doctest::Contains("diverged at step 2 (non-finite model buffers at exchange 2)"));
    }
    // Its only worker was lost: wait() says the run failed; the final state is still there.
    CHECK_THROWS_AS(center->wait(), tether::RunFailedError);
    const tether::CenterSnapshot final_state = center->snapshot();
    CHECK(final_state.buffers == Vec{1.f, 2.f, 3.f});  // a lost worker's last contribution stays
    CHECK(final_state.version == 1);
}
