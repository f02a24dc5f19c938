// A worker's options from the cluster's settings (worker_settings.hpp).
#include "worker/worker_settings.hpp"

#include "util/errors.hpp"

namespace tether {

WorkerOptions worker_options(const ClusterSettings& k) {
    WorkerOptions o;
    o.chunk_elements = std::size_t(k.chunk_elements);
    o.join_timeout_ms = int(k.join_timeout_ms);
    o.reply_timeout_ms = int(k.reply_timeout_ms);
    o.heartbeat_ms = int(k.heartbeat_ms);
    o.center_timeout_ms = int(k.worker_timeout_ms);  // the center is as lost after this silence as a worker is
    o.center_restart_ms = int(k.center_restart_ms);
    o.payload_codec = k.payload_codec();
    o.reply_codec = k.reply_codec_options();
    o.wire_kinds = k.strategy->wire_kinds();
    o.step_delay_ms = k.step_delay_ms;
    o.budget = k.budget_samples > 0;
    o.communication_window = k.strategy->communication_window();
    o.exchange_policy = [strategy = k.strategy, workers = int(k.workers)] { return strategy->make_exchange_policy({workers}); };
    return o;
}

std::vector<ServerLink> connect_servers(const ClusterSettings& k, Transport& transport, const std::string& address,
                                        const std::string& what, const std::string& identity,
                                        const std::vector<ServerIdentity>& identities) {
    const std::vector<std::string> addresses = split_addresses(address, what);
    if (addresses.size() != identities.size())
        throw ConfigError(what + " " + address + ": " + std::to_string(addresses.size()) + " address(es), but " +
                          k.key("servers") + " is " + std::to_string(identities.size()) +
                          "; give every server's address, server 0 first, separated by ','");
    std::vector<ServerLink> links;
    for (std::size_t i = 0; i < addresses.size(); ++i)
        links.push_back({transport.connect(addresses[i], identity, k.worker_transport(addresses[i])), identities[i].fingerprint,
                         identities[i].agreed.dump(), addresses[i], {}, false});
    return links;
}

}  // namespace tether
