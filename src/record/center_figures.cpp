#include "record/center_figures.hpp"

#include <cstdio>
#include <sstream>
#include <string>

#include "transport/user_sockets.hpp"

namespace tether {

nlohmann::json exchange_figures(const CenterStats& now, std::uint64_t version, const CenterStats& previous, double seconds) {
    const double exchanges_since = double(now.staleness_count - previous.staleness_count);
    return {{"center_version", version},
            {"live_workers", now.live_workers()},
            {"bytes_to_center", now.bytes_received},
            {"bytes_to_workers", now.bytes_sent},
            {"rejected_messages", now.rejected_total()},
            {"mean_staleness", exchanges_since > 0 ? (now.staleness_sum - previous.staleness_sum) / exchanges_since : 0.0},
            // The rate since the previous row, so a slowdown shows at once.
            {"samples_per_second", seconds > 0 ? double(now.total_samples - previous.total_samples) / seconds : 0.0}};
}

nlohmann::json center_summary(ServerGroup& group, const ClusterSettings& k, std::uint64_t fingerprint,
                              std::uint64_t refused_handshakes) {
    const CenterStats stats = group.stats();
    nlohmann::json figures = stats.to_json();
    figures["strategy"] = k.strategy->name();
    figures["strategy_parameters"] = k.strategy->describe();
    figures["workers"] = k.workers;
    figures["communication_window"] = k.strategy->communication_window();
    figures["center_version"] = group.center(0).state().version;
    figures["servers"] = k.servers;
    nlohmann::json versions = nlohmann::json::array();
    for (std::size_t i = 0; i < group.size(); ++i) versions.push_back(group.center(i).state().version);
    figures["server_versions"] = versions;  // of the servers run in this process, from the first
    figures["bytes_sent"] = stats.bytes_sent + stats.bytes_received;  // all traffic, both ways
    figures["bytes_to_workers"] = stats.bytes_sent;
    figures["bytes_to_center"] = stats.bytes_received;
    figures["codec"] = to_string(k.payload_codec().kind);
    figures["reply_codec"] = to_string(k.reply_codec_options().kind);
    figures["worker_lost"] = stats.workers_lost > 0;
    figures["mode"] = k.mode;
    figures["refused_handshakes"] = refused_handshakes;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fingerprint));
    figures["fingerprint"] = hex;  // of the agreed settings (cluster/agreed_settings.hpp)
    // curve: authenticated and encrypted; user-only: no keys, but only this user can connect
    // (inproc://, or ipc:// in a folder of mode 0700); off: anyone who can reach the address.
    bool user_only = true;
    std::stringstream addresses(group.address());
    for (std::string address; std::getline(addresses, address, ',');) user_only = user_only && user_only_address(address);
    figures["security"] = k.security.enabled() ? "curve" : user_only ? "user-only" : "off";
    return figures;
}

}  // namespace tether
