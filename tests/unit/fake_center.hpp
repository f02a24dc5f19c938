// A center written by hand for the worker-side tests: a raw Endpoint over inproc:// that
// receives what a worker sends and answers what the test tells it to.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "protocol/header.hpp"
#include "transport/transport.hpp"

namespace tether::testing {

using tether::Dtype;
using tether::Frames;
using tether::Header;
using tether::MessageType;

inline constexpr std::uint64_t kFingerprint = 0x5EED;

inline std::string unique_inproc() {
    static std::atomic<int> counter{0};
    return "inproc://worker-node-test-" + std::to_string(counter++);
}

// The center's half, written by hand.
struct FakeCenter {
    std::shared_ptr<tether::Transport> transport = tether::make_zmq_transport();
    std::unique_ptr<tether::Endpoint> endpoint = transport->bind(unique_inproc(), tether::TransportOptions{});

    struct Message {
        std::string peer;
        Header header;
        Frames frames;
    };
    Message receive(int timeout_ms = 5000) {
        Message m;
        REQUIRE_MESSAGE(endpoint->receive(m.peer, m.frames, timeout_ms), "the worker sent nothing");
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto h = tether::decode(m.frames.header.data(), m.frames.header.size(), reason);
        REQUIRE_MESSAGE(h.has_value(), tether::to_string(reason));
        m.header = *h;
        return m;
    }
    void send(const std::string& peer, MessageType type, std::uint64_t version, const std::vector<float>& data,
              std::uint64_t sequence = 0, std::uint64_t fingerprint = kFingerprint, std::uint32_t worker_id = 0) {
        Header h;
        h.type = type;
        h.worker_id = worker_id;
        h.dtype = Dtype::float32;
        h.sequence = sequence;
        h.center_version = version;
        h.element_count = data.size();
        h.flags = tether::kFlagLastChunk;
        h.fingerprint = fingerprint;
        endpoint->send(peer, tether::encode(h), data.data(), data.size() * sizeof(float));
    }
    // Server 0 of several: the token a worker shows the other servers, after the welcome.
    void send_token(const std::string& peer, const std::string& token, std::uint32_t worker_id = 0) {
        Header h;
        h.type = MessageType::token;
        h.worker_id = worker_id;
        h.element_count = token.size();
        h.fingerprint = kFingerprint;
        endpoint->send(peer, tether::encode(h), token.data(), token.size());
    }
    // The kind travels as the code; the text is for people, and a worker must not read it.
    void send_error(const std::string& peer, tether::ErrorCode code, const std::string& text) {
        Header h;
        h.type = MessageType::error;
        h.error_code = code;
        h.dtype = Dtype::utf8;
        h.element_count = text.size();
        h.fingerprint = kFingerprint;
        endpoint->send(peer, tether::encode(h), text.data(), text.size());
    }
};

}  // namespace tether::testing
