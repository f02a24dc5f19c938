// What the model of a config looks like to the protocol: its size, the settings a center and
// its workers must agree on, and the seeded starting point x~(0) every worker also starts from;
// per server of x~ (cluster.servers), its server range and the settings and fingerprint that
// server agrees to (the run's, with its index).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "protocol/server_ranges.hpp"

namespace tether {

struct ServerIdentity {
    ServerRange range;
    nlohmann::json agreed;  // run/agreed_settings.hpp: server_settings()
    std::uint64_t fingerprint = 0;
};

struct ModelIdentity {
    std::size_t num_parameters = 0;
    nlohmann::json agreed;  // the run's settings, without a server index
    std::vector<ServerIdentity> servers;
    std::vector<float> initial;
    std::string description;
    std::uint64_t fingerprint() const { return servers.front().fingerprint; }  // server 0's
};

// Throws ConfigError when cluster.servers exceeds the parameter count.
ModelIdentity model_identity(const RunConfig& config, const Dataset& train);

}  // namespace tether
