// A worker's options as projections of the cluster's settings, and its links to the servers.
#pragma once

#include <string>
#include <vector>

#include "cluster/cluster_settings.hpp"
#include "worker/server_sessions.hpp"
#include "worker/worker_node.hpp"

namespace tether {

// What a worker is told; the caller adds the epochs it trains.
WorkerOptions worker_options(const ClusterSettings& settings);

// A worker's links to every server at `address` (all of them, server 0 first, separated by
// ','; `what` names where the list came from in errors).
std::vector<ServerLink> connect_servers(const ClusterSettings& settings, Transport& transport, const std::string& address,
                                        const std::string& what, const std::string& identity,
                                        const std::vector<ServerIdentity>& identities);

}  // namespace tether
