// What the center keeps per peer, shared by center.cpp (messages, rounds) and
// center_peers.cpp (joining, liveness). Private to the center.
#pragma once

#include "center/center.hpp"
#include "codec/wire_vector.hpp"

namespace tether {

struct Center::Worker {
    enum class State { joining, active, finished, lost };
    std::string peer;
    std::uint32_t id = 0;
    State state = State::joining;
    Clock::time_point last_seen;
    // The exchange being received: the received frame itself when it came as one shard (the
    // rule then answers in it, in place), else the shards reassembled (or decoded) into one of
    // `assembly`, which a reply still queued in ZeroMQ (or kept by the worker) may hold.
    Payload pending;
    RecycledPayloads assembly;
    std::uint32_t shards_received = 0;
    std::uint64_t sequence = 0, pull_version = 0, samples = 0, bytes_in = 0;
    bool in_round = false;
    // Lossy codecs only (else null): the decoder of its exchanges, the encoder of its replies.
    std::unique_ptr<WireReceiver> from_worker;
    std::unique_ptr<WireSender> to_worker;
    Clock::time_point last_exchange;  // or the welcome: a round waits on it at most the heartbeat timeout
};

}  // namespace tether
