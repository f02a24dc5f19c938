// The defaults of a config file's "cluster" block (docs/config.md), each written here once:
// the config reader (cluster/cluster_settings.cpp, and through it `tether config-keys`), the
// embedding API's ServiceOptions (<tether/tether.hpp>), a worker's session and Python
// (tether's default_options(), read from ServiceOptions) all take them from this table. What
// each key means, and its range, is docs/config.md's; tests/unit/docs_config_test.cpp checks
// its defaults against the reader's.
#pragma once

#include <cstdint>

namespace tether::cluster_defaults {

inline constexpr const char* mode = "embedded";
inline constexpr int workers = 1;
inline constexpr bool center_trains = true;
inline constexpr double quorum = 0.5;
inline constexpr int round_timeout_ms = 30000;
inline constexpr int worker_timeout_ms = 10000;
inline constexpr int center_restart_ms = 60000;
inline constexpr int heartbeat_ms = 2000;
inline constexpr int join_timeout_ms = 60000;
inline constexpr int reply_timeout_ms = 600000;
inline constexpr int chunk_elements = 1 << 20;  // 4 MiB of float32
inline constexpr double max_failed_share = 0.5;
inline constexpr double min_trained_share = 0.9;
inline constexpr int checkpoint_seconds = 60;
inline constexpr std::int64_t warmstart_samples = 0;
inline constexpr bool elastic = false;
inline constexpr int max_peers = 256;
inline constexpr int servers = 1;
inline constexpr const char* server_placement = "center";
inline constexpr const char* codec = "float32";
inline constexpr const char* reply_codec = "same";
inline constexpr double topk_ratio = 0.01;

// The embedding API's run records (ServiceOptions::run_dir), which a config file has no key for.
inline constexpr double metrics_seconds = 10;
inline constexpr std::int64_t metrics_samples = 0;

}  // namespace tether::cluster_defaults
