// The center's figures in a run directory, the same for the tether command and the embedding
// API: the exchange statistics of a metrics.jsonl row, and the center's part of summary.json.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "center/server_group.hpp"
#include "cluster/cluster_settings.hpp"

namespace tether {

// center_version, live_workers, bytes_to_center, bytes_to_workers, rejected_messages, and
// mean_staleness and samples_per_second since `previous` (taken `seconds` earlier).
nlohmann::json exchange_figures(const CenterStats& now, std::uint64_t version, const CenterStats& previous, double seconds);

// Once `group` has served: its counters (CenterStats::to_json), the strategy and its parameters,
// workers, communication window, center and server versions, traffic each way, codecs,
// worker_lost, mode, refused handshakes, security, and the agreed settings' `fingerprint`.
nlohmann::json center_summary(ServerGroup& group, const ClusterSettings& cluster, std::uint64_t fingerprint,
                              std::uint64_t refused_handshakes);

}  // namespace tether
