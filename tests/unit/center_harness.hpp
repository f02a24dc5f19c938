// The harness of the Center tests: a Center serving on its own thread over inproc:// (or TCP),
// and a hand-written worker, a raw Channel of the same Transport that sends encoded headers and
// payloads the way a buggy or hostile peer might. The center's stats and state are read only
// after its thread has been joined (finish() or wait_until_done()).
#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "center/center.hpp"
#include "config/config.hpp"
#include "protocol/header.hpp"
#include "transport/transport.hpp"

namespace tether::testing {

using Vec = std::vector<float>;
// The protocol names every center test uses.
using tether::CenterOptions;
using tether::Channel;
using tether::Dtype;
using tether::Frames;
using tether::Header;
using tether::MessageType;

inline const Vec kInitial{1.f, -1.f, 0.5f};
inline const std::uint64_t kFingerprint = 0xae59d0c3f1a2b4e7ull;  // any value: what the test center and workers share

inline std::string unique_inproc() {
    static std::atomic<int> counter{0};
    return "inproc://center-test-" + std::to_string(counter++);
}

inline std::unique_ptr<CenterRule> center_rule(const nlohmann::json& strategy_block, int workers) {
    const nlohmann::json document = {{"strategy", strategy_block}, {"cluster", {{"workers", workers}}}};
    return parse_config(document).cluster.strategy->make_center_rule({workers, kInitial.size()});
}

inline CenterOptions options_for(int workers) {
    CenterOptions o;
    o.membership.expected_workers = workers;
    o.fingerprint = kFingerprint;
    o.membership.join_timeout_ms = 10000;
    o.membership.worker_timeout_ms = 20000;
    return o;
}

// A Center serving on its own thread.
class ServedCenter {
public:
    // send_timeout_ms 0 is what a real center uses (run/center_run.cpp): it never waits on a peer.
    // `before_serve` prepares the center on this thread first (hold_buffers, resume).
    ServedCenter(const nlohmann::json& strategy_block, CenterOptions options, std::string address = unique_inproc(),
                 int send_timeout_ms = 2000, const std::function<void(Center&)>& before_serve = {})
        : transport_(make_zmq_transport()) {
        TransportOptions transport_options;
        transport_options.send_timeout_ms = send_timeout_ms;
        center_ = std::make_unique<Center>(transport_->bind(address, transport_options),
                                           center_rule(strategy_block, options.membership.expected_workers), kInitial, options);
        if (before_serve) before_serve(*center_);
        thread_ = std::thread([this] {
            try {
                center_->serve();
            } catch (...) {
                failure_ = std::current_exception();
            }
            done_ = true;
        });
    }
    ~ServedCenter() { finish(); }

    std::unique_ptr<Channel> connect(const std::string& identity) {
        return transport_->connect(center_->address(), identity, TransportOptions{});
    }
    std::string address() const { return center_->address(); }

    // Stops the center (if it has not ended by itself) and joins its thread; stats() and
    // state() may be read after this.
    void finish() {
        if (!thread_.joinable()) return;
        center_->stop();
        thread_.join();
    }
    // Waits for serve() to return by itself (all workers gone), up to timeout_ms.
    bool wait_until_done(int timeout_ms) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (std::chrono::steady_clock::now() < deadline) {
            if (done_.load()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        const bool ended = done_.load();
        finish();
        return ended;
    }
    // Whether serve() has returned by itself, now (stops nothing).
    bool done() const { return done_.load(); }
    const Center& center() const { return *center_; }
    std::exception_ptr failure() const { return failure_; }

private:
    std::shared_ptr<Transport> transport_;
    std::unique_ptr<Center> center_;
    std::exception_ptr failure_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

inline Header header(MessageType type, std::uint64_t element_count = 0, Dtype dtype = Dtype::none) {
    Header h;
    h.type = type;
    h.dtype = dtype;
    h.element_count = element_count;
    h.fingerprint = kFingerprint;
    return h;
}

inline Header exchange_header(std::uint64_t sequence, std::uint64_t element_count = 3) {
    Header h = header(MessageType::exchange, element_count, Dtype::float32);
    h.sequence = sequence;
    h.flags = kFlagLastChunk;
    return h;
}

inline void send(Channel& channel, const Header& h, const Vec& payload) {
    channel.send(encode(h), payload.data(), payload.size() * sizeof(float));
}
inline void send_raw(Channel& channel, const std::vector<std::uint8_t>& header_bytes, const Vec& payload = {}) {
    channel.send(header_bytes, payload.data(), payload.size() * sizeof(float));
}

// Receives one message and checks its type; returns its decoded header and fills `payload`.
// Heartbeats are skipped unless expected, as a worker does: the center also sends them to the
// members a synchronous round waits on, to find a closed connection (docs/protocol.md).
inline Header receive(Channel& channel, MessageType expected, Frames& frames, int timeout_ms = 3000) {
    std::optional<Header> h;
    tether::ErrorCode reason = tether::ErrorCode::none;
    do {
        REQUIRE_MESSAGE(channel.receive(frames, timeout_ms), ("no answer from the center within " + std::to_string(timeout_ms) + " ms"));
        h = decode(frames.header.data(), frames.header.size(), reason);
        REQUIRE_MESSAGE(h.has_value(), tether::to_string(reason));
    } while (h->type == MessageType::heartbeat && expected != MessageType::heartbeat);
    if (h->type != expected && h->type == MessageType::error)
        FAIL(("the center answered error: " + std::string(frames.payload.begin(), frames.payload.end())));
    REQUIRE(h->type == expected);
    return *h;
}

inline bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The text of the `error` the center answers.
inline std::string receive_error(Channel& channel) {
    Frames frames;
    const Header h = receive(channel, MessageType::error, frames);
    CHECK(h.dtype == Dtype::utf8);
    CHECK(h.element_count == frames.payload.size());
    CHECK(h.fingerprint == kFingerprint);
    std::string text(frames.payload.begin(), frames.payload.end());
    // The kind travels as its code, and the text opens with the code's reason.
    CHECK_MESSAGE(starts_with(text, std::string(tether::to_string(h.error_code)) + ": "), text);
    CHECK_MESSAGE(h.error_code != tether::ErrorCode::other, text);
    return text;
}

inline Vec floats_of(const Frames& frames) {
    Vec v(frames.payload.size() / sizeof(float));
    std::memcpy(v.data(), frames.payload.data(), v.size() * sizeof(float));
    return v;
}


inline void check_equal(const Vec& actual, const Vec& expected) {
    REQUIRE(actual.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        CAPTURE(i);
        CHECK(actual[i] == doctest::Approx(expected[i]).epsilon(1e-6));
    }
}

inline const nlohmann::json kAeasgd = {{"name", "aeasgd"}, {"moving_rate", 0.25}};

// Sends a message and returns the text of the error the center answers.
inline std::string rejection(Channel& channel, const std::vector<std::uint8_t>& header_bytes, const Vec& payload = {}) {
    send_raw(channel, header_bytes, payload);
    return receive_error(channel);
}

// Says hello and checks the welcome: worker id `id` and x~ as payload.
inline void join(Channel& channel, std::uint32_t id, const Vec& center) {
    send(channel, header(MessageType::hello, center.size()), {});
    Frames frames;
    const Header h = receive(channel, MessageType::welcome, frames);
    CHECK(h.worker_id == id);
    CHECK(h.dtype == Dtype::float32);
    CHECK(h.element_count == center.size());
    CHECK(h.fingerprint == kFingerprint);
    CHECK(floats_of(frames) == center);
}

}  // namespace tether::testing
