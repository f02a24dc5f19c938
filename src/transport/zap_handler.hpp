// The ZAP handler (ZeroMQ RFC 27) that decides who may talk to a CURVE center: a thread with a
// REP socket on inproc://zeromq.zap.01 in the center's context. libzmq asks it during every
// CURVE handshake; it answers 200 for a client public key in the allowlist and 400 for any
// other, so an unknown key is refused before a single message reaches the center's rule.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>

namespace zmq {
class context_t;
}

namespace tether {

class ZapHandler {
public:
    // `allowed` holds Z85 public keys (40 characters). Binds at once, so a socket set up
    // after this finds its handler.
    ZapHandler(zmq::context_t& context, std::set<std::string> allowed);
    // Ends with the context: call context shutdown first, then destroy this.
    ~ZapHandler();

    std::uint64_t accepted() const { return accepted_.load(); }
    std::uint64_t refused() const { return refused_.load(); }

private:
    void serve(void* socket);

    std::set<std::string> allowed_;
    std::atomic<std::uint64_t> accepted_{0}, refused_{0};
    std::thread thread_;
};

}  // namespace tether
