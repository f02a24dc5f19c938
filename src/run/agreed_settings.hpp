// Everything the center and its workers must agree on, as one canonical JSON object: the
// strategy with all its options, the worker count, the chunk size, the model's shapes and the
// identity of the training data. The fingerprint in every header is a hash of it; the hello
// carries the object itself, so that a mismatch is refused naming the key and both values.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace tether {

nlohmann::json agreed_settings(const RunConfig& config, const std::vector<std::size_t>& layer_sizes,
                               std::size_t num_parameters);

// What server k of cluster.servers agrees with its workers: the run's settings and k, so that a
// worker that mixes up the servers' addresses is refused ("cluster.server: center 1, worker 0").
nlohmann::json server_settings(nlohmann::json agreed, std::size_t server);

// FNV-1a over the canonical dump (nlohmann sorts object keys), so equal settings give equal
// fingerprints on every host.
std::uint64_t settings_fingerprint(const nlohmann::json& settings);

// The first key (dotted path) where the two differ, as "KEY: center V1, worker V2"; "" if equal.
std::string first_difference(const nlohmann::json& center, const nlohmann::json& worker);

// For CenterOptions::explain_mismatch: reads a hello's settings and names the first difference.
std::function<std::string(const std::string& worker_settings)> mismatch_explainer(nlohmann::json agreed);

// Data set identity: for IDX files their sizes and a hash of their first 64 KiB (reading the
// whole set would slow every start); for synthetic data the generator's parameters.
nlohmann::json data_identity(const DataConfig& data, std::int64_t seed);

}  // namespace tether
