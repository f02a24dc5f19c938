// A server's options from the cluster's settings (center_settings.hpp).
#include "center/center_settings.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "center/center.hpp"
#include "center/server_tokens.hpp"
#include "protocol/framing.hpp"
#include "transport/curve_keys.hpp"
#include "transport/transport.hpp"

namespace tether {

namespace {

// The key that lets servers 1..S-1 check server 0's word (center/server_tokens.hpp): derived
// from the center's CURVE secret key, which every server holds; else, when this process serves
// all S servers, a random one they share; else none, and the servers take hellos and the final
// request on trust, as a warning says.
std::shared_ptr<const ServerTokens> server_tokens(const ClusterSettings& k, std::size_t here, std::size_t first) {
    const std::size_t servers = std::size_t(k.servers);
    if (servers < 2) return nullptr;
    const CurveKeys& keys = k.security.keys;
    if (k.security.enabled() && !keys.center_secret_key.empty())
        return ServerTokens::from_center_secret(read_curve_key(keys.center_secret_key, k.security_key("center_secret_key")));
    if (here == servers) return ServerTokens::random();
    std::fprintf(stderr,
                 "tether: WARNING: server %zu/%zu: without CURVE keys the servers of this run share no secret, so "
                 "servers 1..%zu cannot check that server 0 gave a worker its id, nor that a request for the final x~ "
                 "comes from server 0. Set security.* (tether keygen). See docs/architecture.md#security\n",
                 first, servers, servers - 1);
    return nullptr;
}

}  // namespace

CenterOptions center_options(const ClusterSettings& k, const ServerIdentity& server) {
    CenterOptions o;
    o.membership.expected_workers = int(k.workers);
    o.fingerprint = server.fingerprint;
    o.explain_mismatch = mismatch_explainer(server.agreed);
    o.agreed_settings = server.agreed.dump();
    o.updates.chunk_elements = std::size_t(k.chunk_elements);
    o.rounds.quorum = k.quorum;
    o.rounds.round_timeout_ms = int(k.round_timeout_ms);
    o.membership.worker_timeout_ms = int(k.worker_timeout_ms);
    o.end.center_restart_ms = int(k.center_restart_ms);
    o.end.budget_samples = std::uint64_t(k.budget_samples);
    // Server 0 hands out the data to whoever asks (tether run's workers with cluster.leases, an
    // embedding's or Python's that take leases), the others none.
    o.membership.leases = server.index == 0;
    o.membership.lease_positions = std::uint64_t(k.budget_samples);
    o.membership.join_timeout_ms = int(k.join_timeout_ms);
    o.max_message_bytes = k.max_message_bytes();
    o.membership.max_peers = std::size_t(k.max_peers);
    o.membership.elastic = k.elastic;
    o.membership.warmstart_samples = std::uint64_t(k.warmstart_samples);
    o.snapshots.checkpoint_ms = int(std::min<std::int64_t>(k.checkpoint_seconds * 1000, std::numeric_limits<int>::max()));
    o.updates.payload_codec = k.payload_codec();
    o.updates.reply_codec = k.reply_codec_options();
    o.updates.wire_kinds = k.strategy->wire_kinds();
    o.updates.dynamic_windows = k.strategy->dynamic_windows();
    o.updates.window = k.strategy->communication_window();
    o.membership.ids_from_hello = server.index > 0;  // server 0 gives the worker ids
    o.issues_tokens = server.index == 0 && k.servers > 1;  // and the tokens the others check (make_servers)
    if (k.servers > 1) o.name = "server " + std::to_string(server.index) + "/" + std::to_string(k.servers);
    return o;
}

std::unique_ptr<ServerGroup> make_servers(const ClusterSettings& k, Transport& transport, const std::vector<std::string>& bind,
                                          std::size_t first, const std::vector<ServerIdentity>& identities,
                                          const std::vector<float>& x,
                                          const std::function<void(CenterOptions&, std::size_t server)>& adjust,
                                          const std::string& inproc_alias) {
    if (!inproc_alias.empty() && bind.size() != 1)
        throw std::invalid_argument("make_servers: an inproc alias names one server; " +
                                    std::to_string(bind.size()) + " bound here");
    // The largest vector a server here sends or receives at once: its range of x~, with b~
    // right behind it on server 0 (model.buffers of the agreed settings).
    const std::size_t buffers = identities.front().agreed.value(nlohmann::json::json_pointer("/model/buffers"), std::size_t(0));
    std::size_t vector_messages = 0;
    for (std::size_t i = 0; i < bind.size(); ++i)
        vector_messages = std::max(vector_messages, chunk_count(identities.at(first + i).range.count, std::size_t(k.chunk_elements)) +
                                                        (first + i == 0 ? chunk_count(buffers, std::size_t(k.chunk_elements)) : 0));
    TransportOptions endpoint_options = k.center_transport(transport, bind, vector_messages);
    endpoint_options.inproc_alias = inproc_alias;
    const std::shared_ptr<const ServerTokens> tokens = server_tokens(k, bind.size(), first);
    std::vector<GroupMember> members;
    for (std::size_t i = 0; i < bind.size(); ++i) {
        const ServerIdentity& server = identities.at(first + i);
        CenterOptions o = center_options(k, server);
        // With CURVE every peer holds an allowed key (server 0 fetching this server's range holds
        // one); without, only a joined worker may read x~ (or anyone, when asked to be insecure).
        o.snapshots.snapshots_for_any_peer = !endpoint_options.curve_server_secret.empty() || k.security.insecure;
        o.tokens = tokens;
        if (adjust) adjust(o, server.index);
        const auto begin = x.begin() + std::ptrdiff_t(server.range.first);
        members.push_back({std::make_unique<Center>(transport.bind(bind[i], endpoint_options),
                                                    k.strategy->make_center_rule({int(k.workers), server.range.count}),
                                                    std::vector<float>(begin, begin + std::ptrdiff_t(server.range.count)), o),
                           server.index, server.range});
    }
    return std::make_unique<ServerGroup>(std::move(members), k.strategy->make_exchange_policy({int(k.workers)})->fragments() > 0);
}

}  // namespace tether
