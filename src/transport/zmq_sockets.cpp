#include "transport/zmq_sockets.hpp"

#include <atomic>
#include <stdexcept>

namespace tether::zmq_sockets {

void apply_common(zmq::socket_t& s, const TransportOptions& o) {
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::sndhwm, o.high_water_mark);
    s.set(zmq::sockopt::rcvhwm, o.receive_high_water_mark > 0 ? o.receive_high_water_mark : o.high_water_mark);
    s.set(zmq::sockopt::sndtimeo, o.send_timeout_ms);
    s.set(zmq::sockopt::heartbeat_ivl, o.heartbeat_interval_ms);
    s.set(zmq::sockopt::heartbeat_timeout, o.heartbeat_timeout_ms);
}

std::size_t receive_more(zmq::socket_t& socket, std::vector<zmq::message_t>& parts, std::size_t& dropped) {
    std::size_t bytes = parts.back().size();
    dropped = 0;
    zmq::message_t scratch;
    bool more = parts.back().more();
    while (more) {
        // the rest of a message arrives with its first part
        if (parts.size() < kPartsKept) {
            parts.emplace_back();
            (void)socket.recv(parts.back(), zmq::recv_flags::none);
            bytes += parts.back().size();
            more = parts.back().more();
        } else {
            (void)socket.recv(scratch, zmq::recv_flags::none);
            bytes += scratch.size();
            more = scratch.more();
            ++dropped;
            scratch.rebuild();
        }
    }
    return bytes;
}

bool receive_parts(zmq::socket_t& socket, std::vector<zmq::message_t>& parts, int timeout_ms, std::size_t& bytes,
                   std::size_t& dropped) {
    parts.clear();
    parts.emplace_back();
    try {
        if (!socket.recv(parts.back(), zmq::recv_flags::dontwait)) {
            if (!wait_readable(socket, timeout_ms)) return false;
            if (!socket.recv(parts.back(), zmq::recv_flags::none)) return false;
        }
        bytes = receive_more(socket, parts, dropped);
    } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) throw TransportClosed("transport shut down");
        throw;
    }
    return true;
}

void to_frames(std::vector<zmq::message_t>& parts, std::size_t first, std::size_t bytes, std::size_t dropped,
               Frames& frames) {
    const std::size_t count = parts.size() - first;
    if (count > 0)
        frames.header.assign(parts[first].data<std::uint8_t>(), parts[first].data<std::uint8_t>() + parts[first].size());
    else
        frames.header.clear();
    if (count > 1 && reinterpret_cast<std::uintptr_t>(parts[first + 1].data()) % alignof(float) == 0) {
        auto owner = std::make_shared<zmq::message_t>(std::move(parts[first + 1]));
        frames.payload = Payload(owner, owner->data<std::uint8_t>(), owner->size());
    } else if (count > 1) {
        // ZeroMQ packs small frames received over tcp:// back to back in one buffer, so they
        // may start at any byte; payloads are read as floats, so those few bytes are copied.
        const zmq::message_t& part = parts[first + 1];
        frames.payload = Payload::allocate(part.size());
        std::memcpy(frames.payload.data(), part.data(), part.size());
    } else {
        frames.payload = Payload();
    }
    frames.extra_frames = (count > 2 ? count - 2 : 0) + dropped;
    frames.message_bytes = bytes;
}

void apply_curve(zmq::socket_t& s, const std::string& address, const TransportOptions& o, bool server) {
    if (address.rfind("inproc://", 0) == 0) return;
    if (server && !o.curve_server_secret.empty()) {
        s.set(zmq::sockopt::curve_server, 1);
        s.set(zmq::sockopt::curve_secretkey, o.curve_server_secret);
        s.set(zmq::sockopt::zap_domain, "tether");
    } else if (!server && !o.curve_server_public.empty()) {
        s.set(zmq::sockopt::curve_serverkey, o.curve_server_public);
        s.set(zmq::sockopt::curve_publickey, o.curve_client_public);
        s.set(zmq::sockopt::curve_secretkey, o.curve_client_secret);
    }
}

zmq::message_t zero_copy_message(const Payload& payload) {
    if (payload.empty()) return zmq::message_t();
    auto* share = new std::shared_ptr<void>(payload.owner());
    try {
        return zmq::message_t(payload.data(), payload.size(),
                              [](void*, void* hint) { delete static_cast<std::shared_ptr<void>*>(hint); }, share);
    } catch (...) {
        delete share;
        throw;
    }
}

bool wait_readable(zmq::socket_t& socket, int timeout_ms) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    try {
        return zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) > 0;
    } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) throw TransportClosed("transport shut down");
        if (e.num() == EINTR) return false;
        throw;
    }
}

std::unique_ptr<zmq::socket_t> monitor_handshakes(zmq::socket_t& socket, zmq::context_t& context, int events) {
    static std::atomic<int> counter{0};
    const std::string address = "inproc://tether-handshake-monitor-" + std::to_string(counter++);
    if (zmq_socket_monitor(socket.handle(), address.c_str(), events) != 0)
        throw std::runtime_error(std::string("cannot monitor the CURVE handshake: ") + zmq_strerror(zmq_errno()));
    auto monitor = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
    monitor->set(zmq::sockopt::linger, 0);
    monitor->connect(address);
    return monitor;
}

}  // namespace tether::zmq_sockets
