// What each place of a run (a worker id: its shard) has trained: the sample count its worker
// last reported and the center counted. Kept in the checkpoint, so that counting goes on from
// there after a resume without counting anything twice: a worker coming back to its place
// adds only what it trained beyond the place's record, and a worker that takes a place over
// (restarted, or an elastic joiner taking a lost worker's place) is told the record in its
// welcome and trains the rest of that place's data, not all of it again.
#pragma once

#include <cstdint>
#include <map>

namespace tether {

class PlaceRecords {
public:
    std::uint64_t trained(std::uint32_t id) const {
        const auto it = samples_.find(id);
        return it == samples_.end() ? 0 : it->second;
    }
    bool known(std::uint32_t id) const { return samples_.count(id) > 0; }
    void set(std::uint32_t id, std::uint64_t samples) { samples_[id] = samples; }
    const std::map<std::uint32_t, std::uint64_t>& all() const { return samples_; }
    void restore(std::map<std::uint32_t, std::uint64_t> samples) { samples_ = std::move(samples); }

private:
    std::map<std::uint32_t, std::uint64_t> samples_;
};

}  // namespace tether
