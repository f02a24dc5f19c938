// What the model of a config looks like to the protocol: its size, per server of x~
// (cluster.servers) its range and the settings and fingerprint it agrees to with its workers
// (cluster/agreed_settings.hpp, with the model's shapes and the data's identity), and the seeded
// starting point x~(0) every worker also starts from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/agreed_settings.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"

namespace tether {

struct ModelIdentity {
    std::size_t num_parameters = 0;
    std::vector<ServerIdentity> servers;
    std::vector<float> initial;
    std::string description;
    std::uint64_t fingerprint() const { return servers.front().fingerprint; }  // server 0's
};

// Throws ConfigError when cluster.servers exceeds the parameter count.
ModelIdentity model_identity(const RunConfig& config, const Dataset& train);

}  // namespace tether
