// A worker's sessions with the S servers of the center (cluster.servers), one ServerSession and
// one DEALER each, seen as one: the rules keep seeing one flat vector.
//   join      server 0 first, which gives the worker id; then servers 1..S-1, each asked for
//             that id (they honour it), in turn; the welcome is x~ assembled from every range.
//   log       a worker's own scalars go to server 0 alone.
//   lease     so do its asks for the next block of the data (cluster.leases).
//   buffers   the model buffers (options.buffer_count) live on server 0 alone: it sends b~ with
//             its welcome, and gets the worker's buffers with each exchange.
//   exchange  each server's range of the payload goes out before any reply is awaited, so the servers
//             work in parallel; the replies are then collected in order, each into its range.
//   waiting   while one server is slow to answer, the others get heartbeats, so none counts
//             the worker lost.
// With S = 1 it is one ServerSession, and that server is the center. Versions and staleness are
// per server: each session sends its own server the version of that server's last reply.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "protocol/server_ranges.hpp"
#include "worker/server_session.hpp"

namespace tether {

// One server as a worker reaches it: the connection and what that server agrees to (its
// fingerprint covers its index, docs/protocol.md).
struct ServerLink {
    std::unique_ptr<Channel> channel;
    std::uint64_t fingerprint = 0;
    std::string agreed_settings;
    std::string address;
    // Where its work goes once it is lost, and whether to keep what was pulled for it (SessionOptions).
    SuccessorSource successor;
    bool keep_pulled = false;
};

// The servers' answers to one exchange, as one vector.
struct ExchangeOutcome {
    Payload reply;              // num_parameters floats
    std::uint64_t version = 0;  // server 0's version after the exchange
    // Ranges whose server had forgotten this worker (it restarted, or counted the worker lost):
    // the worker joined it again, and `reply` holds that welcome's x~ there.
    std::vector<ServerRange> rejoined;
    std::vector<float> buffers;  // b~, when server 0 (which holds the buffers) welcomed this worker again
    int window = 0;              // server 0's: the window this worker uses from now on (0: its own)
    // A server that answered counts the run's budget trained (each counts the workers' samples
    // from the same headers, so any one's word will do when the exchange skipped server 0).
    bool budget_met = false;
};

class ServerSessions {
public:
    // `options` apply to every server; fingerprint, agreed settings and address come from each link.
    ServerSessions(std::vector<ServerLink> links, const SessionOptions& options, std::size_t num_parameters);

    Welcome join();
    // The worker id (place) the next hello to server 0 asks for; server 0 gives it when no live
    // worker holds it.
    void ask_for(std::uint32_t id) { sessions_.front()->set_worker_id(id); }
    // `buffers` (options.buffer_count floats) go to server 0, before its slice of the payload.
    ExchangeOutcome exchange(const Payload& payload, const WorkerProgress& at, const Payload* buffers = nullptr);
    // The listed servers alone (streaming DiLoCo's fragments): each one's range of `payload`
    // (the whole vector) goes out before any reply is awaited, as in exchange(), and the
    // outcome's `reply` (the whole vector's size) holds their ranges; `buffers` go to server 0
    // when it is listed.
    ExchangeOutcome exchange_some(const std::vector<std::size_t>& servers, const Payload& payload,
                                  const WorkerProgress& at, const Payload* buffers = nullptr);
    const ServerRange& range(std::size_t k) const { return ranges_.at(k); }
    void heartbeat_if_idle();
    void bye();
    // A log message (protocol/worker_log.hpp) to server 0, which writes the run directory.
    void log(std::string scalars_json) { sessions_.front()->log(std::move(scalars_json)); }
    // Leases of the data (cluster.leases) come from server 0 alone.
    void ask_lease(std::uint64_t want, std::uint64_t total) { sessions_.front()->ask_lease(want, total); }
    LeaseAnswer take_lease(std::uint64_t want, std::uint64_t total) { return sessions_.front()->take_lease(want, total); }
    void close();
    void set_progress(const WorkerProgress& p);

    std::size_t servers() const { return sessions_.size(); }
    PulledRange pulled(std::size_t k) { return sessions_.at(k)->pulled(); }
    std::uint32_t worker_id() const { return sessions_.front()->worker_id(); }
    std::uint64_t bytes_sent() const;
    std::uint64_t bytes_received() const;
    std::size_t rejoins() const;

private:
    void send(std::size_t k, const Payload& payload, const WorkerProgress& at, const Payload* buffers);
    // Server k's reply, its range's floats; records the range in `out` when it joined again.
    Payload receive(std::size_t k, ExchangeOutcome& out);

    std::size_t num_parameters_;
    std::vector<ServerRange> ranges_;
    std::vector<std::size_t> every_server_;  // 0 .. S-1, for exchange()
    std::vector<std::string> addresses_;
    std::vector<std::unique_ptr<ServerSession>> sessions_;
    RecycledPayloads replies_;  // S > 1: the assembled replies
};

}  // namespace tether
