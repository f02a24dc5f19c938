// What the center keeps per peer, from its hello to its bye, loss or refusal. Membership
// (center/membership.hpp) owns the records; the other parts see the ones it hands them.
// Private to the center.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "protocol/framing.hpp"

namespace tether {

struct CenterWorker {
    using Clock = std::chrono::steady_clock;
    enum class State { joining, active, finished, lost };
    std::string peer;
    std::uint32_t id = 0;
    State state = State::joining;
    Clock::time_point last_seen;
    std::uint64_t sequence = 0, pull_version = 0, samples = 0, bytes_in = 0;
    // A streamed exchange's chunks applied, bytes out and its ranges' squared update norms, so far.
    std::uint32_t streamed_chunks = 0;
    std::uint64_t start_version = 0;  // x~'s version at the streamed exchange's first chunk
    std::uint64_t bytes_out = 0;
    double norm_squares = 0;
    // The sequence of the last exchange accepted from this peer (0: none since its hello), and
    // the samples its last accepted exchange (or its hello) claimed.
    std::uint64_t accepted_sequence = 0, exchanged_samples = 0;
    bool in_round = false;
    // A joiner beyond the places that hold shards (MembershipOptions::places_hold_shards): it has
    // no data of its own, is told so in its welcome, and any sample it claims is implausible.
    bool placeless = false;
    // Joined and held back by the warmstart (MembershipOptions::warmstart_samples) until worker 0
    // has trained alone for long enough.
    bool held = false;
    // From its welcome until it leaves: its exchanges' chunks in (checked, reassembled or
    // decoded), its replies' chunks out (through the reply codec).
    std::unique_ptr<ChunkAssembler> from_worker;
    std::unique_ptr<ChunkSender> to_worker;
    std::unique_ptr<ChunkAssembler> buffers_from;  // its model buffers, float32 (a center that holds buffers)
    Clock::time_point last_exchange;  // or the welcome: a round waits on it at most the heartbeat timeout
    // Dynamic local updates (center/window_sizing.hpp): the local steps its current exchange's
    // header said, the steps and time of its last measured exchange, and its rate.
    std::uint64_t exchange_steps = 0, rate_steps = 0;
    Clock::time_point rate_since{};
    double steps_per_second = 0;

    bool live() const { return state == State::active || state == State::joining; }
    bool gone() const { return state == State::lost || state == State::finished; }
};

}  // namespace tether
