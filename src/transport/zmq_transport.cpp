// The ZeroMQ implementation of the transport seam: ROUTER on the center, DEALER per worker.
// ROUTER_MANDATORY makes a send to a gone peer fail (EHOSTUNREACH) instead of vanishing, and
// a send timeout turns a full queue (EAGAIN) into an error instead of a silent drop.
#include <zmq.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "transport/transport.hpp"
#include "transport/zap_handler.hpp"
#include "transport/zmq_sockets.hpp"

namespace tether {
namespace {

using namespace zmq_sockets;

class ZmqEndpoint final : public Endpoint {
public:
    // `failed_handshakes`: the transport's count of handshakes that failed other than by ZAP
    // (a plaintext peer at a CURVE endpoint: the mechanisms differ, and ZAP is never asked).
    ZmqEndpoint(std::shared_ptr<void> owner, zmq::context_t& context, const std::string& address,
                const TransportOptions& o, std::atomic<std::uint64_t>& failed_handshakes)
        : owner_(std::move(owner)), socket_(context, zmq::socket_type::router), failed_handshakes_(failed_handshakes) {
        apply_common(socket_, o);
        socket_.set(zmq::sockopt::router_mandatory, 1);
        socket_.set(zmq::sockopt::maxmsgsize, std::int64_t(o.max_message_bytes));
        apply_curve(socket_, address, o, true);
        // A peer whose keys or mechanism differ fails with a protocol error; one that closes before
        // the handshake ends (a launcher's port probe, tcp_probe.cpp) fails with no detail, and
        // is not counted: every launched rank probes rank 0's port before it joins.
        if (!o.curve_server_secret.empty() && address.rfind("inproc://", 0) != 0)
            monitor_ = monitor_handshakes(socket_, context, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL);
        try {
            socket_.bind(address);
        } catch (const zmq::error_t& e) {
            throw std::runtime_error("cannot bind " + address + ": " + e.what());
        }
        address_ = socket_.get(zmq::sockopt::last_endpoint);
        if (!o.inproc_alias.empty()) {
            if (o.inproc_alias.rfind("inproc://", 0) != 0)
                throw std::invalid_argument("TransportOptions::inproc_alias: \"" + o.inproc_alias + "\" is not inproc://NAME");
            try {
                socket_.bind(o.inproc_alias);
            } catch (const zmq::error_t& e) {
                throw std::runtime_error("cannot bind " + o.inproc_alias + ": " + e.what());
            }
        }
        // A wildcard bind reports 0.0.0.0; workers on this host reach it via loopback.
        const std::string wildcard = "tcp://0.0.0.0:";
        if (address_.rfind(wildcard, 0) == 0) address_ = "tcp://127.0.0.1:" + address_.substr(wildcard.size());
    }
    std::string address() const override { return address_; }

    bool receive(std::string& peer, Frames& frames, int timeout_ms) override {
        if (monitor_) {
            const bool readable = poll_with_monitor(socket_, *monitor_, timeout_ms, [this](std::uint16_t, const std::string&) {
                failed_handshakes_.fetch_add(1, std::memory_order_relaxed);
                warn_failed_handshake();
            });
            if (!readable) return false;
            timeout_ms = 0;
        }
        std::size_t bytes = 0, dropped = 0;
        if (!receive_parts(socket_, parts_, timeout_ms, bytes, dropped)) return false;
        peer.assign(parts_[0].data<char>(), parts_[0].size());
        to_frames(parts_, 1, bytes - parts_[0].size(), dropped, frames);
        return true;
    }

    void send(const std::string& peer, const std::vector<std::uint8_t>& header, const void* payload,
              std::size_t bytes) override {
        zmq::message_t body(payload, bytes);
        send_message(peer, header, body);
    }
    void send(const std::string& peer, const std::vector<std::uint8_t>& header, const Payload& payload) override {
        zmq::message_t body = zero_copy_message(payload);
        send_message(peer, header, body);
    }

private:
    // Said at the first failed handshake and then at most every 10 s: a rank given another
    // secret retries forever, and a stranger on the port must not flood the log.
    void warn_failed_handshake() {
        ++failed_here_;
        const auto now = std::chrono::steady_clock::now();
        if (warned_at_ && now - *warned_at_ < std::chrono::seconds(10)) return;
        warned_at_ = now;
        std::fprintf(stderr, "tether: WARNING: %s: %llu CURVE handshake(s) failed so far: a peer's keys differ from this "
                     "center's (with TETHER_SECRET, every rank must have the same secret) or it is no tether peer\n",
                     address_.c_str(), static_cast<unsigned long long>(failed_here_));
    }

    void send_message(const std::string& peer, const std::vector<std::uint8_t>& header, zmq::message_t& body) {
        try {
            if (!socket_.send(zmq::buffer(peer), zmq::send_flags::sndmore) ||
                !socket_.send(zmq::buffer(header), zmq::send_flags::sndmore) ||
                !socket_.send(body, zmq::send_flags::none))
                throw DeliveryError("worker is not reading: its queue is full (the center never waits to send)");
        } catch (const zmq::error_t& e) {
            if (e.num() == EHOSTUNREACH) throw DeliveryError("worker is gone (EHOSTUNREACH)", /*gone=*/true);
            if (e.num() == ETERM) throw TransportClosed("transport shut down");
            throw DeliveryError(std::string("send failed: ") + e.what());
        }
    }

    std::shared_ptr<void> owner_;  // keeps the context alive until the socket is closed
    zmq::socket_t socket_;
    std::string address_;
    std::vector<zmq::message_t> parts_;
    std::atomic<std::uint64_t>& failed_handshakes_;
    std::unique_ptr<zmq::socket_t> monitor_;  // with CURVE: handshakes that fail before ZAP
    std::uint64_t failed_here_ = 0;
    std::optional<std::chrono::steady_clock::time_point> warned_at_;
};

class ZmqChannel final : public Channel {
public:
    ZmqChannel(std::shared_ptr<void> owner, zmq::context_t& context, const std::string& address,
               const std::string& identity, const TransportOptions& o)
        : owner_(std::move(owner)), socket_(context, zmq::socket_type::dealer) {
        apply_common(socket_, o);
        // A worker's last message is its bye: give it time to leave before the socket closes.
        socket_.set(zmq::sockopt::linger, 5000);
        socket_.set(zmq::sockopt::routing_id, identity);
        apply_curve(socket_, address, o, false);
        if (!o.curve_server_public.empty() && address.rfind("inproc://", 0) != 0)
            monitor_ = monitor_handshakes(socket_, context,
                                          ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                              ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                              ZMQ_EVENT_DISCONNECTED);
        try {
            socket_.connect(address);
        } catch (const zmq::error_t& e) {
            throw std::runtime_error("cannot connect to " + address + ": " + e.what());
        }
    }

    void send(const std::vector<std::uint8_t>& header, const void* payload, std::size_t bytes) override {
        zmq::message_t body(payload, bytes);
        send_message(header, body);
    }
    void send(const std::vector<std::uint8_t>& header, const Payload& payload) override {
        zmq::message_t body = zero_copy_message(payload);
        send_message(header, body);
    }

    void abandon() override {
        try {
            socket_.set(zmq::sockopt::linger, 0);
        } catch (const zmq::error_t&) {
            // The transport was shut down (ETERM): nothing queued survives that anyway. Called
            // from destructors, so it must not throw.
        }
    }

    std::chrono::milliseconds closed_for() const override {
        if (!closed_) return {};
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - closed_since_);
    }

    bool receive(Frames& frames, int timeout_ms) override {
        if (monitor_) {
            // An event is no message: wait on until data or the deadline (false means timed out).
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
            const auto on_event = [this](std::uint16_t id, const std::string& where) { check_handshake_event(id, where); };
            while (!poll_with_monitor(socket_, *monitor_, timeout_ms, on_event)) {
                timeout_ms = int(std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
                if (timeout_ms <= 0) return false;
            }
            timeout_ms = 0;
        }
        std::size_t bytes = 0, dropped = 0;
        if (!receive_parts(socket_, parts_, timeout_ms, bytes, dropped)) return false;
        to_frames(parts_, 0, bytes, dropped, frames);
        return true;
    }

private:
    // A refused CURVE handshake, as the worker's monitor saw it: the error names the center.
    void check_handshake_event(std::uint16_t id, const std::string& where) {
        // A center that cannot read our HELLO (it was encrypted to another public key) drops the
        // connection without a word; only a run of such drops, never a completed handshake
        // between them, tells differing keys from a center that went away after its welcome.
        if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            handshake_done_ = true;
            dropped_handshakes_ = 0;
            closed_ = false;
            return;
        }
        if (id == ZMQ_EVENT_DISCONNECTED) {
            const bool mid_handshake = !handshake_done_;
            handshake_done_ = false;
            if (!mid_handshake && !closed_) {  // an open connection closed: ZeroMQ reconnects, if anyone listens
                closed_ = true;
                closed_since_ = std::chrono::steady_clock::now();
            }
            if (!mid_handshake || ++dropped_handshakes_ < kDroppedHandshakes) return;
        }
        // A failure from here on: what this channel queued cannot reach that center, so closing
        // it must not linger for it.
        if (id == ZMQ_EVENT_DISCONNECTED || id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
            abandon();
        if (id == ZMQ_EVENT_DISCONNECTED)
            throw DeliveryError("the CURVE keys differ: the center at " + where + " closed the connection " +
                                std::to_string(dropped_handshakes_) + " times during the CURVE handshake. "
                                "security.center_public_key must be that center's public key; with TETHER_SECRET, "
                                "every rank must have the same secret (and no rank a stale ~/.tether/run-*/secret)");
        if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            throw DeliveryError("the center at " + where +
                                " refused this worker's CURVE key: it is not in the center's security.authorized_workers");
        if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
            throw DeliveryError("the CURVE handshake with the center at " + where +
                                " failed: is security.center_public_key the center's public key, and is the center's "
                                "security on?");
    }

    void send_message(const std::vector<std::uint8_t>& header, zmq::message_t& body) {
        try {
            if (!socket_.send(zmq::buffer(header), zmq::send_flags::sndmore) ||
                !socket_.send(body, zmq::send_flags::none))
                throw DeliveryError("the center is not reading: the send queue stayed full for the send timeout");
        } catch (const zmq::error_t& e) {
            if (e.num() == ETERM) throw TransportClosed("transport shut down");
            throw DeliveryError(std::string("send to the center failed: ") + e.what());
        }
    }

    std::shared_ptr<void> owner_;
    zmq::socket_t socket_;
    std::unique_ptr<zmq::socket_t> monitor_;  // CURVE only: handshake failures
    std::vector<zmq::message_t> parts_;
    static constexpr int kDroppedHandshakes = 3;  // ZMQ reconnects after 100-200 ms: about 0.4 s
    bool handshake_done_ = false;                  // the current connection completed its handshake
    int dropped_handshakes_ = 0;                   // connections dropped mid-handshake since the last completed one
    bool closed_ = false;                          // a completed connection closed, and none completed since
    std::chrono::steady_clock::time_point closed_since_;
};

class ZmqTransport final : public Transport, public std::enable_shared_from_this<ZmqTransport> {
public:
    std::unique_ptr<Endpoint> bind(const std::string& address, const TransportOptions& o) override {
        return std::make_unique<ZmqEndpoint>(shared_from_this(), context_, address, o, failed_handshakes_);
    }
    std::unique_ptr<Channel> connect(const std::string& address, const std::string& identity,
                                     const TransportOptions& o) override {
        return std::make_unique<ZmqChannel>(shared_from_this(), context_, address, identity, o);
    }
    void shutdown() override { context_.shutdown(); }
    void require_authentication(std::set<std::string> allowed_public_keys) override {
        if (!zap_) zap_ = std::make_unique<ZapHandler>(context_, std::move(allowed_public_keys));
    }
    std::uint64_t refused_handshakes() const override {
        return (zap_ ? zap_->refused() : 0) + failed_handshakes_.load(std::memory_order_relaxed);
    }
    ~ZmqTransport() override {
        if (zap_) {
            context_.shutdown();  // ends the handler's wait; its thread closes its socket
            zap_.reset();
        }
    }

private:
    zmq::context_t context_;
    std::unique_ptr<ZapHandler> zap_;
    std::atomic<std::uint64_t> failed_handshakes_{0};  // at CURVE endpoints, before ZAP (ZmqEndpoint)
};

}  // namespace

std::shared_ptr<Transport> make_zmq_transport() { return std::make_shared<ZmqTransport>(); }

}  // namespace tether
