// Everything a server of x~ and its workers must agree on, as one canonical JSON object: the
// strategy with all its options, the cluster settings that shape the wire (workers, servers,
// chunk size, codecs), the server's index, the model's shapes and the identity of the training
// data. The fingerprint in every header is a hash of it; the hello carries the object itself,
// so that a mismatch is refused naming the key and both values. Built by
// ClusterSettings::server_identities (cluster/cluster_settings.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "protocol/server_ranges.hpp"

namespace tether {

struct ServerIdentity {
    std::size_t index = 0;  // server k of cluster.servers
    ServerRange range;
    nlohmann::json agreed;
    std::uint64_t fingerprint = 0;
};

// FNV-1a over the canonical dump (nlohmann sorts object keys), so equal settings give equal
// fingerprints on every host.
std::uint64_t settings_fingerprint(const nlohmann::json& settings);

// For CenterOptions::explain_mismatch: reads a hello's settings and names the first key (dotted
// path) where they differ from `agreed`, as "KEY: center V1, worker V2".
std::function<std::string(const std::string& worker_settings)> mismatch_explainer(nlohmann::json agreed);

}  // namespace tether
