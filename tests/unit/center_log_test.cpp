// A worker's own scalars (protocol/worker_log.hpp, center/center_log.cpp): a joined worker's
// log reaches on_log with its id and samples; an unjoined peer's, a malformed one, a reserved
// or bad name, a non-number and an oversized one are refused, counted by reason, and reach
// nothing; a worker's own encode_log refuses the same before anything is sent.
#include <doctest/doctest.h>

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "center_harness.hpp"
#include "protocol/worker_log.hpp"
#include "test_support.hpp"

using namespace tether::testing;

namespace {

void send_text(Channel& channel, Header h, const std::string& text) {
    h.element_count = text.size();
    channel.send(tether::encode(h), text.data(), text.size());
}

Header log_header(std::uint64_t samples = 0) {
    Header h = header(MessageType::log, 0, Dtype::utf8);
    h.samples = samples;
    return h;
}

// The logs a center received, from its thread.
struct Received {
    std::mutex mutex;
    std::vector<tether::LogRecord> logs;
    std::function<void(tether::Center&)> hook() {
        return [this](tether::Center& c) {
            c.on_log = [this](const tether::LogRecord& r) {
                std::lock_guard<std::mutex> lock(mutex);
                logs.push_back(r);
            };
        };
    }
};

}  // namespace

TEST_CASE("a joined worker's scalars reach on_log with its id, its samples and the center's total") {
    Received received;
    ServedCenter served(kAeasgd, options_for(2), unique_inproc(), 2000, received.hook());
    auto a = served.connect("worker-a");
    auto b = served.connect("worker-b");
    send(*a, header(MessageType::hello, 3), {});
    send(*b, header(MessageType::hello, 3), {});
    Frames frames;
    // Two peers' hellos are not ordered: either may be worker 0.
    const std::uint32_t a_id = receive(*a, MessageType::welcome, frames).worker_id;
    const std::uint32_t b_id = receive(*b, MessageType::welcome, frames).worker_id;
    REQUIRE(a_id != b_id);
    send_text(*a, log_header(64), tether::encode_log({{"loss", 0.5}, {"validation_accuracy", 0.75}}));
    send_text(*b, log_header(32), tether::encode_log({{"loss", std::nan("")}}));
    // A log counts samples as a heartbeat does: while its worker is live.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (served.center().stats_now().total_samples < 96 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(served.center().stats_now().total_samples == 96);
    send(*a, header(MessageType::bye), {});
    send(*b, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    CHECK(served.center().stats().rejected_total() == 0);
    REQUIRE(received.logs.size() == 2);
    const auto& first = received.logs[0].worker_id == a_id ? received.logs[0] : received.logs[1];
    const auto& second = received.logs[0].worker_id == a_id ? received.logs[1] : received.logs[0];
    CHECK(first.worker_id == a_id);
    CHECK(first.worker_samples == 64);
    CHECK(first.scalars == nlohmann::json{{"loss", 0.5}, {"validation_accuracy", 0.75}});
    CHECK(second.worker_id == b_id);
    CHECK(second.scalars == nlohmann::json{{"loss", nullptr}});  // JSON has no NaN: null
    // Neither worker exchanged: what they claimed never reached x~ and left with them.
    CHECK(served.center().stats().total_samples == 0);
}

TEST_CASE("malformed, oversized, reserved and unjoined logs are refused, counted by reason, and reach nothing") {
    Received received;
    ServedCenter served(kAeasgd, options_for(1), unique_inproc(), 2000, received.hook());
    auto stranger = served.connect("stranger");
    send_text(*stranger, log_header(), R"({"loss": 1})");
    CHECK(starts_with(receive_error(*stranger), "unknown worker"));

    auto a = served.connect("worker-a");
    join(*a, 0, kInitial);
    const auto refused = [&](const std::string& text, Header h = log_header()) {
        send_text(*a, h, text);
        return receive_error(*a);
    };
    CHECK(starts_with(refused("{\"loss\": "), "malformed log: not UTF-8 JSON"));
    CHECK(starts_with(refused("{\"acc\": \"\xff\"}"), "malformed log: not UTF-8 JSON"));
    CHECK(contains(refused(R"({"samples": 3})"), "\"samples\": the center writes it"));
    CHECK(contains(refused(R"({"a b": 3})"), "letters, digits"));
    CHECK(contains(refused(R"({"loss": "low"})"), "a scalar is a number"));
    CHECK(contains(refused(R"([1, 2])"), "expected a JSON object"));
    CHECK(contains(refused(R"({})"), "no scalars"));
    CHECK(starts_with(refused("{\"x\": " + std::string(tether::kMaxLogBytes, '1') + "}"), "log too large"));
    Header float_log = log_header();
    float_log.dtype = Dtype::float32;
    CHECK(starts_with(refused(R"({"loss": 1})", float_log), "malformed log: a log is one chunk of utf8"));
    send_text(*a, log_header(), R"({"loss": 0.25})");  // a good one still goes through
    send(*a, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    const auto& rejected = served.center().stats().rejected;
    CHECK(rejected.at(tether::ErrorCode::unknown_worker) == 1);
    CHECK(rejected.at(tether::ErrorCode::malformed_log) == 8);
    CHECK(rejected.at(tether::ErrorCode::log_too_large) == 1);
    REQUIRE(received.logs.size() == 1);
    CHECK(received.logs[0].scalars == nlohmann::json{{"loss", 0.25}});
}

TEST_CASE("a worker's encode_log refuses what the center would, before anything is sent") {
    CHECK(nlohmann::json::parse(tether::encode_log({{"loss", 0.5}, {"train/acc", 1}})) ==
          nlohmann::json{{"loss", 0.5}, {"train/acc", 1.0}});
    CHECK_THROWS_WITH_AS(tether::encode_log({{"loss", 1}, {"loss", 2}}), doctest::Contains("\"loss\" given twice"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(tether::encode_log({{"worker", 1}}), doctest::Contains("the center writes it"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(tether::encode_log({{"", 1}}), doctest::Contains("a name has 1 to 64"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(tether::encode_log({}), doctest::Contains("no scalars"), std::invalid_argument);
    std::vector<std::pair<std::string, double>> many;
    for (int i = 0; i < 300; ++i) many.push_back({"scalar_" + std::to_string(i), 0.123456789});
    CHECK_THROWS_WITH_AS(tether::encode_log(many), doctest::Contains("at most 4096"), std::invalid_argument);
}
