// CURVE on a center's endpoint when security.* says so (the transport's ZAP handler with the
// allowlist, the server's secret key in `options`), and a warning when a center reachable from
// other hosts runs without it.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "transport/transport.hpp"

namespace tether {

// Call once, before binding the `addresses` of this process's servers on `transport`. Throws
// ConfigError for missing or mismatched keys.
void secure_center(const RunConfig& config, const std::vector<std::string>& addresses, Transport& transport,
                   TransportOptions& options);

// The client side of CURVE, for a connection to a server at `address` when security.* is set:
// the server's public key and this process's own pair (security.worker_*_key), which the
// server's allowlist must hold. Nothing for inproc://. Throws ConfigError for missing keys.
void secure_client(const RunConfig& config, const std::string& address, TransportOptions& options);

}  // namespace tether
