// What a cluster's settings give the transport: a server's endpoints and a worker's channels
// (cluster_settings.hpp).
#include <algorithm>
#include <cstdio>
#include <limits>

#include "cluster/cluster_settings.hpp"
#include "protocol/framing.hpp"
#include "protocol/header.hpp"
#include "transport/curve_keys.hpp"
#include "transport/transport.hpp"
#include "transport/user_sockets.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

// Room in a message beyond the header and one chunk's payload: a hello carries the agreed
// settings as JSON instead of a chunk, which for a model of many layers exceeds a tiny chunk.
constexpr std::size_t kMessageSlack = 8192;


// ZMTP heartbeats close a connection that has carried nothing for this long. Not sooner than
// the restart window: a connection closed while its far end is stalled or unreachable loses
// what was on its way (an exchange, whose reply the worker would then wait for in vain), while
// one kept open delivers it late. Liveness is the protocol's own (worker_timeout_ms); a peer
// that died closes its connections itself.
int connection_timeout_ms(const ClusterSettings& k) {
    return int(std::min<std::int64_t>(std::max(k.worker_timeout_ms, k.center_restart_ms), std::numeric_limits<int>::max()));
}

// Small messages a peer's queue holds beyond one vector's chunks: heartbeat answers, an error,
// a hello or a bye.
constexpr int kSmallMessages = 8;
constexpr int kMinQueueMessages = 64;

// What ZeroMQ may hold of what the peers sent and the center has not read yet, all peers
// together: each peer's receive queue is its share of this, in chunks (at least one). A center
// that reads slower than its peers send (64 workers pushing a 100M-parameter vector at once)
// then leaves the rest in the kernel and at the senders, instead of queueing up to two vectors
// per peer (at 16 workers, 25 copies of x~). inproc:// peers are not bounded
// by it (libzmq adds the sender's queue to the receiver's).
constexpr std::size_t kReceiveBudgetBytes = std::size_t(256) << 20;

bool is_loopback_tcp(const std::string& address) {
    const std::string host = address.substr(6, address.rfind(':') - 6);
    return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]" || host == "::1";
}

// Binding without keys: inproc:// is unreachable from outside the process and ipc:// in a folder
// of mode 0700 from other users; loopback and other ipc:// reach every user of this host,
// anything else every host that can route here.
void check_unsecured(const ClusterSettings& k, const std::vector<std::string>& bind) {
    for (const std::string& address : bind) {
        if (user_only_address(address)) continue;  // inproc://, or ipc:// in a folder of this user's alone
        const bool local = address.rfind("tcp://", 0) != 0 || is_loopback_tcp(address);
        if (k.security.insecure) {
            if (!local)
                std::fprintf(stderr,
                             "tether: WARNING: the center binds %s without security: anyone who can reach it can join and "
                             "move x~.%s See docs/architecture.md#security\n",
                             address.c_str(), k.origin == "cluster" ? " Set security.* (tether keygen)." : "");
            continue;
        }
        if (!local)
            throw ConfigError(k.key("endpoint") + " " + address + ": binding beyond loopback without CURVE keys would let "
                              "anyone who can reach it join, move x~ and read it; give the keys (" +
                              k.security_key("center_public_key") + " and the others, tether keygen writes them; " +
                              "docs/architecture.md#security), or set " + k.security_key("insecure") + " true to bind without");
        std::fprintf(stderr,
                     "tether: WARNING: the center binds %s without CURVE keys: any user of this host can join and move "
                     "x~, and a peer may make ZeroMQ buffer a message of any size before tether sees it. See "
                     "docs/architecture.md#security\n",
                     address.c_str());
    }
}

}  // namespace

std::size_t ClusterSettings::max_message_bytes() const {
    return kHeaderBytes + max_payload_bytes(payload_codec(), std::size_t(chunk_elements)) + kMessageSlack;
}

TransportOptions ClusterSettings::center_transport(Transport& transport, const std::vector<std::string>& bind,
                                                   std::size_t vector_messages) const {
    TransportOptions o;
    // The center never waits on a peer: a reply that cannot be queued at once is dropped and
    // counted (rejections, heartbeat answers) or costs that worker its place (data replies);
    // a server holds the state lock that snapshots and statistics wait for.
    o.send_timeout_ms = 0;
    // One vector and a few small messages per peer, each way, twice: a peer that stops reading
    // costs the center two replies, not a thousand (libzmq counts whole messages, and each chunk
    // is one). Twice, because libzmq's reader tells the writer what it has consumed only every
    // (HWM + 1) / 2 messages: up to half the HWM of messages a worker has read still count as
    // queued, and a reply of a vector's chunks sent after a vector the worker read to its end
    // found the queue "full" (a 21M-parameter model, 21 chunks: every local run lost its
    // workers).
    // At least 64: with a vector of one chunk, 18 messages left a worker that fell behind
    // under load (heartbeat answers it had not read yet, and libzmq's late count of what was
    // read) one reply from losing its place; 64 small messages cost nothing.
    o.high_water_mark =
        std::max(kMinQueueMessages, 2 * (int(std::min<std::size_t>(vector_messages, 1 << 20)) + kSmallMessages));
    const std::size_t chunk_bytes = std::size_t(std::max<std::int64_t>(chunk_elements, 1)) * sizeof(float);
    const std::size_t peers = std::size_t(std::max<std::int64_t>(workers, 1));
    o.receive_high_water_mark =
        int(std::clamp<std::size_t>(kReceiveBudgetBytes / (peers * chunk_bytes), 1, std::size_t(o.high_water_mark)));
    o.max_message_bytes = max_message_bytes();
    // No ZMTP pings from the center (it answers the workers'): libzmq 4.3.4 aborts the process
    // (stream_engine_base.cpp:331, !_io_error) when a ping timer fires on a connection whose peer
    // closed while its queue to the center was full, e.g. a worker that says bye and exits
    // while its heartbeats from before its welcome are still queued (measured: 1 in 8 resumed
    // runs of a finished 2-server run). The center's liveness is the protocol's own
    // (cluster.worker_timeout_ms); a peer whose process ends closes its connection itself.
    o.heartbeat_interval_ms = 0;
    o.heartbeat_timeout_ms = connection_timeout_ms(*this);
    const CurveKeys& sec = security.keys;
    if (!security.enabled()) {
        check_unsecured(*this, bind);
        return o;
    }
    bool all_inproc = true;  // one process: nothing to authenticate
    for (const std::string& address : bind) all_inproc = all_inproc && address.rfind("inproc://", 0) == 0;
    if (all_inproc) return o;
    const std::string public_name = security_key("center_public_key"), secret_name = security_key("center_secret_key"),
                      allowed_name = security_key("authorized_workers");
    if (!curve_available()) throw ConfigError(public_name + ": set, but this libzmq has no CURVE support");
    if (sec.center_secret_key.empty())
        throw ConfigError(secret_name + ": the center needs its secret key (tether keygen writes one)");
    if (sec.authorized_workers.empty())
        throw ConfigError(allowed_name + ": the center needs the allowed worker public keys");
    const std::string secret = read_curve_key(sec.center_secret_key, secret_name);
    const std::string expected = read_curve_key(sec.center_public_key, public_name);
    if (curve_public_key_of(secret) != expected)
        throw ConfigError(secret_name + ": not the secret key of the public key " + public_name + " gives");
    transport.require_authentication(read_curve_allowlist(sec.authorized_workers, allowed_name));
    o.curve_server_secret = secret;
    return o;
}

TransportOptions ClusterSettings::worker_transport(const std::string& address) const {
    TransportOptions o;
    o.send_timeout_ms = int(worker_timeout_ms);  // a send, too, waits no longer than the liveness bound
    o.heartbeat_interval_ms = int(heartbeat_ms);
    o.heartbeat_timeout_ms = connection_timeout_ms(*this);
    const CurveKeys& sec = security.keys;
    if (!security.enabled() || address.rfind("inproc://", 0) == 0) return o;
    if (sec.worker_public_key.empty() || sec.worker_secret_key.empty())
        throw ConfigError(security_key("worker_public_key") + " / " + security_key("worker_secret_key") +
                          ": a worker (and server 0 fetching other servers' ranges) needs its own key pair when " +
                          security_key("center_public_key") + " is set (tether keygen writes one)");
    o.curve_server_public = read_curve_key(sec.center_public_key, security_key("center_public_key"));
    o.curve_client_public = read_curve_key(sec.worker_public_key, security_key("worker_public_key"));
    o.curve_client_secret = read_curve_key(sec.worker_secret_key, security_key("worker_secret_key"));
    return o;
}

std::vector<std::string> ClusterSettings::bind_addresses(const std::function<std::string()>& fallback) const {
    std::vector<std::string> out;
    if (address.empty()) {
        for (std::int64_t k = 0; k < servers; ++k) out.push_back(fallback());
        return out;
    }
    out = split_addresses(address, key("endpoint"));
    if (out.size() != std::size_t(servers))
        throw ConfigError(key("endpoint") + ": " + std::to_string(out.size()) + " address(es) for " + key("servers") + " " +
                          std::to_string(servers) + "; give one per server, separated by ',', or \"\" for the default");
    return out;
}

}  // namespace tether
