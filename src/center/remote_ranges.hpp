// The server ranges of x~ that other processes serve (`tether server --server K/S`, K > 0), as
// server 0 fetches them to evaluate x~: one DEALER per server, a `snapshot` request to each
// (all sent before any answer is awaited), answered with its range of x~ in float32 chunks.
// A final fetch asks each server for x~ once its workers have all finished; it carries server
// 0's token (center/server_tokens.hpp), without which those servers do not leave on it; once
// every range is in, server 0 confirms it to each (kFlagReceived), and only then do they leave.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/framing.hpp"
#include "protocol/server_ranges.hpp"
#include "transport/transport.hpp"

namespace tether {

class ServerTokens;  // center/server_tokens.hpp

// What a server's last answer said besides its range.
struct RangeAnswer {
    std::uint64_t version = 0;  // that server's version of its range
    std::uint64_t samples = 0;  // the samples its workers had trained
};

struct RemoteServer {
    std::size_t index = 0;  // server k of S
    ServerRange range;
    std::string address;
    std::uint64_t fingerprint = 0;  // that server's (its agreed settings name its index)
};

// Thrown by a fetch when a server sent no answer within the timeout (other failures: std::runtime_error).
struct RangeSilent : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class RemoteRanges {
public:
    // Where the servers are, once known: their addresses in the order of `servers` (with a
    // server on every rank, from server 0's directory, which waits for the last rank to say).
    using AddressSource = std::function<std::vector<std::string>()>;

    // `tokens`: server 0's (null: the servers share no key, and the final request carries none).
    // `addresses`: when given, the servers' addresses are asked of it at the first fetch (theirs
    // in `servers` are then ignored).
    RemoteRanges(Transport& transport, std::vector<RemoteServer> servers, const TransportOptions& options,
                 std::size_t chunk_elements, int timeout_ms, std::shared_ptr<const ServerTokens> tokens,
                 AddressSource addresses = {});
    ~RemoteRanges();
    bool empty() const { return servers_.empty(); }
    // Writes every remote range into x (x~'s full size). `final`: each server answers once all
    // its workers are done. Throws naming the server and its address when one does not answer
    // within the timeout, or answers what it should not.
    void fetch(float* x, bool final);
    // The servers (addresses known after the first fetch) and, by the same index, what each
    // said in the last fetch's answer.
    const std::vector<RemoteServer>& servers() const { return servers_; }
    const std::vector<RangeAnswer>& answered() const { return answered_; }

private:
    void connect();
    void receive(std::size_t i, float* x, int timeout_ms);
    void confirm(const std::string& token);

    Transport& transport_;
    TransportOptions options_;
    AddressSource addresses_;

    std::vector<RemoteServer> servers_;
    std::shared_ptr<const ServerTokens> tokens_;
    std::vector<std::unique_ptr<Channel>> channels_;
    std::vector<ChunkAssembler> answers_;  // one per server
    std::vector<RangeAnswer> answered_;    // one per server
    int timeout_ms_;
    std::uint64_t sequence_ = 0;
    bool confirmed_ = false;  // the final ranges' receipt was sent: the channels linger for it
};

}  // namespace tether
