// Work that is leased, not owned (cluster.leases): the run's data are one stream of positions
// (position q is sample q mod N of pass q / N, in an order every worker draws alike from the
// seed: data/sample_stream.hpp), and server 0 hands each worker its next block of positions
// when it asks. A worker that trains faster asks more often; a joiner asks at once; what a
// departed worker had leased beyond its last exchange goes back, and the next ask is served it
// first. The center never sees the data: a lease is two numbers.
#pragma once

#include <cstdint>
#include <deque>
#include <map>

#include <tether/lease.hpp>

#include "center/center_stats.hpp"

namespace tether {

class Leases {
public:
    // `total`: the positions the run has (the budget, or the passes over the data); 0: not
    // known yet, the first worker that names one sets it (LeaseAsk::total), else unbounded.
    // `counts`: where the figures go (CenterStats::leases), for summary.json.
    Leases(LeaseCounts& counts, std::uint64_t total) : counts_(counts) { counts_.positions = total; }

    // Worker `id`'s next block of at most `want` positions, which it trains after everything it
    // holds: a returned block first, else fresh positions. `samples`: what the worker has
    // trained so far, where its first lease begins in its own count (the next ones follow on);
    // `exchanged`: what its last exchange said it had trained (the leases below it are done).
    // `total`: the worker's word for the positions the run has, taken when none is known.
    // `live`: the workers training now. At the run's end, when fewer fresh positions are left
    // than `live` full blocks, a block is the rest shared among them (at least want / 8), so the
    // last blocks end together and a fast worker does not wait out a slow one's full block.
    Lease grant(std::uint32_t id, std::uint64_t want, std::uint64_t samples, std::uint64_t exchanged, std::uint64_t total,
                std::uint64_t live = 1);
    // Worker `id` left having exchanged `exchanged` samples in all (its own count): of its
    // leases, the part beyond that goes back, to be served again.
    void release(std::uint32_t id, std::uint64_t exchanged);


private:
    struct Held {
        Lease lease;
        std::uint64_t begins_at = 0;  // the worker's sample count where its training of it begins
    };
    LeaseCounts& counts_;     // positions: the run's (0: unbounded)
    std::uint64_t next_ = 0;  // the first position never handed out
    std::deque<Lease> returned_;
    std::map<std::uint32_t, std::deque<Held>> held_;
};

}  // namespace tether
