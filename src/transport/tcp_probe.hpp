// Whether anything listens at a TCP address, asked with a plain connect: how a rank started by a
// launcher learns within seconds that rank 0's center is not there. ZeroMQ itself reconnects
// quietly forever, and its hello would wait the whole join timeout. And which address this host
// has toward another.
#pragma once

#include <string>

namespace tether {

// Connects to HOST:PORT ("tcp://HOST:PORT"; HOST a name, an IPv4 address or [IPv6]) and closes
// the connection at once. True when a connection was accepted within `timeout_ms`; otherwise
// false with `why` ("connection refused", "cannot resolve host", "no answer within 500 ms").
bool tcp_listening(const std::string& address, int timeout_ms, std::string& why);

// This host's address toward `address` (tcp://HOST:PORT): the source address the kernel picks for
// a route there (a UDP socket connected to it, which sends nothing), as "198.18.0.2" or
// "[fd00::2]": how a rank names its own server to the others when only rank 0's host is known.
// Throws std::runtime_error naming the address when it cannot be resolved or routed.
std::string local_address_toward(const std::string& address);

// A port P on 127.0.0.1 such that P .. P + count - 1 were all free a moment ago (a local run's
// ranks each bind one). Throws std::runtime_error when none is found in 100 tries.
int free_loopback_ports(int count);

}  // namespace tether
