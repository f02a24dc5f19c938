// A rank telling server 0 where its server listens, with a server on every rank
// (cluster.server_placement "ranks"; center/server_directory.hpp): asked again every 100 ms
// until server 0 knows every server, so that the rank's worker can connect to all of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace tether {

struct DirectoryEntry {
    std::size_t server = 0;        // k: this rank's server
    std::string address;           // where it listens, as the others reach it: tcp://HOST:PORT
    std::uint64_t initial_hash = 0;  // initial_vector_hash of this rank's x~(0)
};

// Tells server 0 at `server0` (its fingerprint `fingerprint`, reached with `options`) where this
// rank's server is, and returns every server's address, server 0 first, joined by ',' as a
// worker connects to them, once server 0 has heard from all: this rank's own as `own` (as bound:
// tcp://* is reached over the loopback), server 0 as `server0` (where this rank reached it).
// Throws std::runtime_error naming the servers still missing after `timeout_ms`, or server 0's
// refusal (another x~(0), no directory). When a survivor serves this rank's range (it was lost
// and is back), the list holds the survivor's address there instead of `own`.
std::string join_directory(Transport& transport, const std::string& server0, const TransportOptions& options,
                           std::uint64_t fingerprint, const DirectoryEntry& entry, const std::string& own, int timeout_ms);

// A worker lost server k at `lost`: asks server 0 once where its range went (a survivor took it
// over, center/server_directory.hpp) and returns the new address, or "" when it has not moved
// yet or no answer came within 100 ms (ask again). `sequence`: one more than the last asked.
std::string moved_server(Channel& channel, const std::string& server0, std::uint64_t fingerprint, std::size_t server,
                         const std::string& lost, std::uint64_t initial_hash, std::uint64_t sequence);

// A rank k > 0 starting its server afresh (not resuming) asks server 0 first whether the run is
// already under way without it (it was lost and is back): then its range is not served from
// x~(0) beside the survivors' copies; it waits, asking every 200 ms up to `wait_ms`, until rank 0
// has taken the range over, and returns every server's address as join_directory does, its
// own range at rank 0. No run under way (server 0 not answering yet, or servers still
// missing): nullopt, start as usual. Throws when the range has not moved within wait_ms.
std::optional<std::string> come_back(Transport& transport, const std::string& server0, const TransportOptions& options,
                                     std::uint64_t fingerprint, const DirectoryEntry& entry, int wait_ms);

}  // namespace tether
