// The Transport seam: a worker's Channel to the center and the center's Endpoint facing all
// workers. Messages are two frames, header and payload, opaque here (protocol/header.hpp
// gives them meaning). ZeroMQ itself is included only by the files of src/transport/ behind this
// seam: zmq_transport.cpp (the sockets), zap_handler.cpp (the CURVE allowlist, a socket of its
// own) and curve_keys.cpp (zmq_curve_keypair, from <zmq.h>).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/payload.hpp"

namespace tether {

// One received message. The header (72 bytes) is copied out; the payload frame is adopted
// without a copy and may be written in place and sent back (see payload.hpp).
struct Frames {
    std::vector<std::uint8_t> header;
    Payload payload;
    std::size_t extra_frames = 0;  // frames beyond the two expected (a malformed message)
    // Bytes of all frames together. Frames past the expected ones are read and freed at once,
    // so a message of many frames costs one frame of memory here; the center refuses a message
    // whose total exceeds its cap (ZeroMQ's maxmsgsize bounds one frame only).
    std::size_t message_bytes = 0;
};

// A send that could not be delivered: the peer is gone, or it stopped reading and its queue
// stayed full past the send timeout. Never silent.
class DeliveryError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    // `gone`: the peer's connection is closed (its process ended), not merely slow to read.
    DeliveryError(const std::string& what, bool gone) : std::runtime_error(what), gone_(gone) {}
    bool gone() const { return gone_; }

private:
    bool gone_ = false;
};

class Channel {
public:
    virtual ~Channel() = default;
    // Copies `payload` into the message (for small or reused buffers).
    virtual void send(const std::vector<std::uint8_t>& header, const void* payload, std::size_t bytes) = 0;
    // Sends `payload` without copying it; the caller must not write to it afterwards.
    virtual void send(const std::vector<std::uint8_t>& header, const Payload& payload) = 0;
    // Waits up to timeout_ms (< 0: forever); false on timeout.
    virtual bool receive(Frames& frames, int timeout_ms) = 0;
    // Drops whatever is still queued when the channel closes (normally kept for a while, so
    // that a last bye leaves).
    virtual void abandon() = 0;
    // How long ago the peer's side closed the connection (its host closed the socket: the
    // process ended) without it being made again, as seen by receive(); zero while it is up, and
    // where the transport cannot tell (the ZeroMQ transport tells with CURVE, whose monitor it
    // reads). A link that goes down closes nothing until the connection's heartbeat times out
    // (heartbeat_timeout_ms), so a closed connection well before that is a process gone.
    virtual std::chrono::milliseconds closed_for() const { return {}; }
};

class Endpoint {
public:
    virtual ~Endpoint() = default;
    // The address workers connect to, with the port the OS picked for "tcp://host:*" or ":0".
    virtual std::string address() const = 0;
    // Waits up to timeout_ms; false on timeout. `peer` identifies the sender for replies.
    virtual bool receive(std::string& peer, Frames& frames, int timeout_ms) = 0;
    // Throws DeliveryError when the peer is gone or not reading. The first form copies the
    // payload, the second sends it without copying (the caller must not write to it afterwards).
    virtual void send(const std::string& peer, const std::vector<std::uint8_t>& header, const void* payload,
                      std::size_t bytes) = 0;
    virtual void send(const std::string& peer, const std::vector<std::uint8_t>& header, const Payload& payload) = 0;
};

struct TransportOptions {
    int send_timeout_ms = 10000;
    int high_water_mark = 1000;
    // The receive side's, in messages; 0: high_water_mark.
    int receive_high_water_mark = 0;
    std::size_t max_message_bytes = 64u << 20;  // the center refuses anything larger
    int heartbeat_interval_ms = 1000;            // ZMTP heartbeats (connection level)
    int heartbeat_timeout_ms = 10000;
    // CURVE (Z85 keys; empty: off, and always off for inproc://, which has no handshake). The
    // center sets its secret key (and its transport's allowlist, require_authentication); a
    // worker sets the center's public key and its own pair.
    std::string curve_server_secret;
    std::string curve_server_public, curve_client_public, curve_client_secret;
    // An endpoint's second address, inproc://NAME, bound beside the first: a rank's own worker
    // reaches the server on its rank without a socket or a CURVE handshake (nothing leaves the
    // process; docs/architecture.md, "Servers on the ranks"). Empty: none.
    std::string inproc_alias;
};

// Owns the ZeroMQ context; inproc:// endpoints only reach channels of the same Transport.
class Transport {
public:
    virtual ~Transport() = default;
    virtual std::unique_ptr<Endpoint> bind(const std::string& address, const TransportOptions& options) = 0;
    virtual std::unique_ptr<Channel> connect(const std::string& address, const std::string& identity,
                                             const TransportOptions& options) = 0;
    // Unblocks every socket of this transport (they then throw); for shutting down.
    virtual void shutdown() = 0;
    // Starts the ZAP handler (transport/zap_handler.hpp) with the worker public keys (Z85) that
    // may complete a CURVE handshake with this transport's endpoints. Call before bind().
    virtual void require_authentication(std::set<std::string> allowed_public_keys) = 0;
    // CURVE handshakes refused so far: keys not in the allowlist (ZAP), and peers whose
    // handshake failed before ZAP was asked (plaintext at a CURVE endpoint, a wrong server key).
    virtual std::uint64_t refused_handshakes() const = 0;
};

std::shared_ptr<Transport> make_zmq_transport();

// Thrown by a socket when its transport was shut down.
class TransportClosed : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace tether
