// ZeroMQ socket helpers of the transport (transport/zmq_transport.cpp): common options, CURVE,
// whole multipart receives into Frames, zero-copy sends, and the handshake monitor that sees
// the CURVE failures a socket never turns into messages.
#pragma once

#include <zmq.hpp>

#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/payload.hpp"
#include "transport/transport.hpp"

namespace tether::zmq_sockets {

// Parts kept of one message: routing id, header, payload and one more, enough to see that a
// message has extra frames. Later parts are received and freed one by one.
constexpr std::size_t kPartsKept = 4;

// Linger 0, the high-water marks, the send timeout and ZMTP heartbeats of `o`.
void apply_common(zmq::socket_t& s, const TransportOptions& o);
// The CURVE keys of `o` (as server or client); nothing for inproc:// addresses.
void apply_curve(zmq::socket_t& s, const std::string& address, const TransportOptions& o, bool server);
// Receives the rest of a multipart message whose first part is in parts.back(); returns the
// bytes of all its parts and the number of parts it dropped unread beyond kPartsKept.
std::size_t receive_more(zmq::socket_t& socket, std::vector<zmq::message_t>& parts, std::size_t& dropped);
// Receives one whole multipart message, waiting up to timeout_ms; false on timeout. A message
// already queued is taken without polling (one system call less per message on a busy center).
// A transport shut down meanwhile surfaces as TransportClosed.
bool receive_parts(zmq::socket_t& socket, std::vector<zmq::message_t>& parts, int timeout_ms, std::size_t& bytes,
                   std::size_t& dropped);
// parts[first..] as Frames: the header is copied (72 bytes); the payload frame is adopted as
// it is, no copy.
void to_frames(std::vector<zmq::message_t>& parts, std::size_t first, std::size_t bytes, std::size_t dropped,
               Frames& frames);
// A message that sends `payload` in place: ZeroMQ holds a share of its ownership until its I/O
// thread is done with the bytes, then lets go (the free function runs on that thread).
zmq::message_t zero_copy_message(const Payload& payload);
// Whether `socket` becomes readable within timeout_ms.
bool wait_readable(zmq::socket_t& socket, int timeout_ms);
// A PAIR socket receiving `socket`'s handshake failures (`events`, ZMQ_EVENT_HANDSHAKE_*): a
// refused or failed handshake never produces a message, so it is watched beside the data.
std::unique_ptr<zmq::socket_t> monitor_handshakes(zmq::socket_t& socket, zmq::context_t& context, int events);

// Waits up to timeout_ms for data on `socket` or an event on `monitor`; returns whether data
// is readable, and calls on_event(id, where) for an event.
template <typename OnEvent>
bool poll_with_monitor(zmq::socket_t& socket, zmq::socket_t& monitor, int timeout_ms, OnEvent&& on_event) {
    zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}, {monitor.handle(), 0, ZMQ_POLLIN, 0}};
    try {
        zmq::poll(items, 2, std::chrono::milliseconds(timeout_ms));
    } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) throw TransportClosed("transport shut down");
        if (e.num() != EINTR) throw;
    }
    if (items[1].revents & ZMQ_POLLIN) {
        // Every event queued since the last call: a worker between two receives may have seen several.
        zmq::message_t event, where;
        while (monitor.recv(event, zmq::recv_flags::dontwait)) {
            if (event.more()) (void)monitor.recv(where, zmq::recv_flags::dontwait);
            std::uint16_t id = 0;
            if (event.size() >= 2) std::memcpy(&id, event.data(), 2);
            on_event(id, where.to_string());
        }
    }
    return items[0].revents & ZMQ_POLLIN;
}

}  // namespace tether::zmq_sockets
