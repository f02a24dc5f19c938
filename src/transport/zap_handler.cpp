#include "transport/zap_handler.hpp"

#include <zmq.hpp>

#include <cstdio>
#include <vector>

namespace tether {

namespace {
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
}

ZapHandler::ZapHandler(zmq::context_t& context, std::set<std::string> allowed) : allowed_(std::move(allowed)) {
    // Bound here, on the caller's thread, so the endpoint exists before any CURVE socket binds;
    // the socket then moves to the handler's thread and is only used there.
    auto* socket = new zmq::socket_t(context, zmq::socket_type::rep);
    socket->set(zmq::sockopt::linger, 0);
    socket->bind(kZapEndpoint);
    thread_ = std::thread([this, socket] { serve(socket); });
}

ZapHandler::~ZapHandler() {
    if (thread_.joinable()) thread_.join();
}

void ZapHandler::serve(void* raw) {
    std::unique_ptr<zmq::socket_t> socket(static_cast<zmq::socket_t*>(raw));
    std::vector<zmq::message_t> request;
    while (true) {
        request.clear();
        try {
            do {
                request.emplace_back();
                if (!socket->recv(request.back(), zmq::recv_flags::none)) return;
            } while (request.back().more());
        } catch (const zmq::error_t&) {
            return;  // ETERM: the transport shut down
        }
        // version, request id, domain, address, identity, mechanism, credentials...
        bool allow = false;
        if (request.size() >= 7 && request[5].to_string() == "CURVE" && request[6].size() == 32) {
            char z85[41] = {};
            zmq_z85_encode(z85, request[6].data<std::uint8_t>(), 32);
            allow = allowed_.count(z85) > 0;
        }
        (allow ? accepted_ : refused_)++;
        const std::string id = request.size() > 1 ? request[1].to_string() : std::string();
        const char* status = allow ? "200" : "400";
        const char* text = allow ? "OK" : "public key not in security.authorized_workers";
        try {
            socket->send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
            socket->send(zmq::buffer(id), zmq::send_flags::sndmore);
            socket->send(zmq::buffer(std::string(status)), zmq::send_flags::sndmore);
            socket->send(zmq::buffer(std::string(text)), zmq::send_flags::sndmore);
            socket->send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // user id
            socket->send(zmq::str_buffer(""), zmq::send_flags::none);     // metadata
        } catch (const zmq::error_t&) {
            return;
        }
    }
}

}  // namespace tether
