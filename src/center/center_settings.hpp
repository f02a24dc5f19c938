// A server's options as projections of the cluster's settings, and the servers bound with them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "center/center_options.hpp"
#include "center/server_group.hpp"
#include "cluster/cluster_settings.hpp"

namespace tether {

// What one server is told; the caller adds what depends on its run (snapshots, the samples a
// worker can have trained).
CenterOptions center_options(const ClusterSettings& settings, const ServerIdentity& server);

// Binds server identities[first + i] at bind[i] on `transport`, each a Center over its range of
// x~ (`x`, the whole vector) with center_options() and what `adjust` adds. `inproc_alias` (one
// server only): also bound there, for a worker in this process (TransportOptions).
std::unique_ptr<ServerGroup> make_servers(const ClusterSettings& settings, Transport& transport,
                                          const std::vector<std::string>& bind, std::size_t first,
                                          const std::vector<ServerIdentity>& identities, const std::vector<float>& x,
                                          const std::function<void(CenterOptions&, std::size_t server)>& adjust = {},
                                          const std::string& inproc_alias = {});

}  // namespace tether
