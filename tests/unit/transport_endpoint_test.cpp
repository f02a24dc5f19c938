// A CURVE endpoint's two doors. Its inproc alias (TransportOptions::inproc_alias): with a server
// on every rank, the rank's own worker reaches its server in-process, with no socket and no CURVE
// handshake, while the endpoint's tcp:// address still admits only CURVE peers (a rank's exchange with its own range stays in its
// process). And a plaintext peer at the tcp address counts as a refused handshake (ZAP never
// sees it, so the endpoint counts it); a port probe that closes before the greeting does not.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/curve_keys.hpp"
#include "transport/tcp_probe.hpp"
#include "transport/transport.hpp"

namespace {

using tether::Frames;
using tether::TransportOptions;

// Sends one small message on `channel` and says whether `endpoint` received it within 2 s.
bool reaches(tether::Channel& channel, tether::Endpoint& endpoint) {
    const std::vector<std::uint8_t> header(72, 7);
    channel.send(header, "x", 1);
    std::string peer;
    Frames frames;
    return endpoint.receive(peer, frames, 2000) && frames.header == header;
}

}  // namespace

TEST_CASE("a CURVE endpoint's inproc alias is reached in-process without keys; its tcp address wants them, and counts a plaintext peer as refused, a port probe not") {
    auto transport = tether::make_zmq_transport();
    const tether::CurveKeyPair server = tether::generate_curve_key_pair(), client = tether::generate_curve_key_pair();
    transport->require_authentication({client.public_key});
    TransportOptions bound;
    bound.curve_server_secret = server.secret_key;
    bound.inproc_alias = "inproc://transport-alias-test";
    const auto endpoint = transport->bind("tcp://127.0.0.1:*", bound);
    CHECK(endpoint->address().rfind("tcp://127.0.0.1:", 0) == 0);  // the address others reach, not the alias

    const auto own = transport->connect("inproc://transport-alias-test", "own", TransportOptions{});
    CHECK(reaches(*own, *endpoint));

    TransportOptions keyed;
    keyed.curve_server_public = server.public_key;
    keyed.curve_client_public = client.public_key;
    keyed.curve_client_secret = client.secret_key;
    const auto remote = transport->connect(endpoint->address(), "remote", keyed);
    CHECK(reaches(*remote, *endpoint));

    // A launcher's port probe (each rank's, before it joins) connects and closes before any
    // greeting: no handshake was refused, and the center must not warn about keys.
    std::string why;
    CHECK(tether::tcp_listening(endpoint->address(), 2000, why));
    std::string peer;
    Frames frames;
    CHECK_FALSE(endpoint->receive(peer, frames, 500));
    CHECK(transport->refused_handshakes() == 0);

    const std::uint64_t refused = transport->refused_handshakes();
    const auto plaintext = transport->connect(endpoint->address(), "plaintext", TransportOptions{});
    CHECK_FALSE(reaches(*plaintext, *endpoint));
    plaintext->abandon();
    CHECK(transport->refused_handshakes() > refused);
}

TEST_CASE("an inproc alias that is not inproc:// is refused by name") {
    auto transport = tether::make_zmq_transport();
    TransportOptions bound;
    bound.inproc_alias = "tcp://127.0.0.1:*";
    CHECK_THROWS_WITH_AS(transport->bind("tcp://127.0.0.1:*", bound),
                         doctest::Contains("TransportOptions::inproc_alias"), std::invalid_argument);
}
