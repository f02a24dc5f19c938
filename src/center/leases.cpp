#include "center/leases.hpp"

#include <algorithm>

namespace tether {

Lease Leases::grant(std::uint32_t id, std::uint64_t want, std::uint64_t samples, std::uint64_t exchanged,
                    std::uint64_t total, std::uint64_t live) {
    counts_.on = true;  // summary.json gives the leases of a run whose workers took them
    if (counts_.positions == 0) counts_.positions = total;
    std::deque<Held>& mine = held_[id];
    while (!mine.empty() && mine.front().begins_at + mine.front().lease.count <= exchanged) mine.pop_front();
    Lease lease;
    if (want == 0) return lease;
    if (!returned_.empty()) {  // a departed worker's rest, in the order it left
        Lease& back = returned_.front();
        lease = {back.start, std::min(want, back.count)};
        back.start += lease.count;
        back.count -= lease.count;
        if (back.count == 0) returned_.pop_front();
        counts_.served_again += lease.count;
    } else {
        const std::uint64_t left = counts_.positions == 0 ? want : (next_ < counts_.positions ? counts_.positions - next_ : 0);
        live = std::max<std::uint64_t>(live, 1);
        const bool tail = counts_.positions > 0 && left < want * live;
        const std::uint64_t share = tail ? std::max((left + live - 1) / live, std::max<std::uint64_t>(want / 8, 1)) : want;
        lease = {next_, std::min({want, share, left})};
        next_ += lease.count;
    }
    if (lease.count == 0) return lease;
    const std::uint64_t begins_at = mine.empty() ? samples : mine.back().begins_at + mine.back().lease.count;
    mine.push_back({lease, begins_at});
    counts_.granted += lease.count;
    return lease;
}

void Leases::release(std::uint32_t id, std::uint64_t exchanged) {
    const auto it = held_.find(id);
    if (it == held_.end()) return;
    for (const Held& h : it->second) {
        const std::uint64_t trained = exchanged > h.begins_at ? std::min(exchanged - h.begins_at, h.lease.count) : 0;
        if (trained == h.lease.count) continue;
        returned_.push_back({h.lease.start + trained, h.lease.count - trained});
        ++counts_.returned_blocks;
        counts_.returned_positions += h.lease.count - trained;
    }
    held_.erase(it);
}

}  // namespace tether
