// A stranger on the host: a raw ZeroMQ DEALER with no keys, as a hostile peer would use, that
// says what it likes to a center. What it needs to be let in (the fingerprint and the parameter
// count) anyone can compute from public config values; the tests compute them from the config.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "data/load.hpp"
#include "protocol/header.hpp"
#include "run/model_identity.hpp"

namespace tether::testing {

// What a center of `config` checks in a hello: server 0's fingerprint and the parameter count.
struct CenterFacts {
    std::uint64_t fingerprint = 0;
    std::uint64_t parameters = 0;
};

inline CenterFacts center_facts(const nlohmann::json& document) {
    const RunConfig config = parse_config(document);
    const TrainTestSplit data = load_data(config.data, std::uint64_t(config.training.seed));
    const ModelIdentity identity = model_identity(config, *data.train);
    return {identity.servers.front().fingerprint, identity.num_parameters};
}

class Stranger {
public:
    // Connects at once; with ZeroMQ's defaults what it sends waits for the center to bind, and
    // a short reconnect interval makes it arrive within milliseconds of that.
    // `receive_queue`: messages its socket queues unread (1: a peer that does not read keeps
    // next to nothing of what it is sent; the rest waits in the kernel and at the sender).
    // `curve`: the center's public key, then the stranger's public and secret keys (Z85), for a
    // peer that holds an allowed key (an insider); empty: none.
    Stranger(zmq::context_t& context, const std::string& address, const std::string& identity, int receive_queue = 1000,
             const std::vector<std::string>& curve = {})
        : socket_(context, zmq::socket_type::dealer) {
        if (curve.size() == 3) {
            socket_.set(zmq::sockopt::curve_serverkey, curve[0]);
            socket_.set(zmq::sockopt::curve_publickey, curve[1]);
            socket_.set(zmq::sockopt::curve_secretkey, curve[2]);
        }
        socket_.set(zmq::sockopt::linger, 0);
        socket_.set(zmq::sockopt::rcvhwm, receive_queue);
        socket_.set(zmq::sockopt::routing_id, identity);
        socket_.set(zmq::sockopt::reconnect_ivl, 10);
        socket_.connect(address);
    }

    // The payload is not copied: it must stay as it is until the socket is closed.
    void send(const Header& h, const void* payload = nullptr, std::size_t bytes = 0) {
        const auto encoded = encode(h);
        socket_.send(zmq::buffer(encoded), zmq::send_flags::sndmore);
        zmq::message_t body(const_cast<void*>(payload), bytes, nullptr, nullptr);
        socket_.send(body, zmq::send_flags::none);
    }
    void hello(const CenterFacts& facts) {
        Header h;
        h.type = MessageType::hello;
        h.element_count = facts.parameters;
        h.fingerprint = facts.fingerprint;
        send(h);
    }
    // What any peer learns from a center that answers it: the fingerprint from the header of the
    // error a hello with a wrong one gets. nullopt when nothing answers within timeout_ms.
    std::optional<CenterFacts> learn(std::uint64_t parameters, int timeout_ms) {
        hello({0, parameters});
        const std::optional<Header> error = receive(timeout_ms);
        if (!error) return std::nullopt;
        return CenterFacts{error->fingerprint, parameters};
    }
    // One message of `frames` frames of `frame_bytes` each, all pointing at one buffer (the
    // stranger's own memory stays small): libzmq delivers a multipart message only whole.
    void send_huge(std::size_t frames, std::size_t frame_bytes) {
        static std::vector<char> frame;
        frame.assign(frame_bytes, 'x');
        for (std::size_t i = 0; i < frames; ++i) {
            zmq::message_t part(frame.data(), frame.size(), nullptr, nullptr);  // not copied, never freed
            socket_.send(part, i + 1 < frames ? zmq::send_flags::sndmore : zmq::send_flags::none);
        }
    }
    // The header of the next message, if one comes within timeout_ms (its frames are read).
    std::optional<Header> receive(int timeout_ms, std::string* text = nullptr) {
        zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
        if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0) return std::nullopt;
        zmq::message_t header;
        (void)socket_.recv(header);
        for (bool more = header.more(); more;) {
            zmq::message_t part;
            (void)socket_.recv(part);
            if (text) *text = part.to_string();
            more = part.more();
        }
        tether::ErrorCode reason = tether::ErrorCode::none;
        return decode(header.data<std::uint8_t>(), header.size(), reason);
    }
    zmq::socket_t& socket() { return socket_; }

private:
    zmq::socket_t socket_;
};

// Resident memory of process `pid` in bytes (VmRSS of /proc/PID/status); 0 once it is gone.
inline std::size_t resident_bytes(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::size_t(std::stoull(line.substr(6))) * 1024;
    return 0;
}

// Samples a process's resident memory every 10 ms on its own thread; peak() is the most seen.
class MemoryWatch {
public:
    explicit MemoryWatch(pid_t pid) : thread_([this, pid] {
        while (!stop_) {
            peak_ = std::max(peak_.load(), resident_bytes(pid));
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }) {}
    ~MemoryWatch() { stop(); }
    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    std::size_t peak() const { return peak_; }

private:
    std::atomic<bool> stop_{false};
    std::atomic<std::size_t> peak_{0};
    std::thread thread_;
};

}  // namespace tether::testing
