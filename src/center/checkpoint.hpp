// The center's checkpoint: x~, b~ (the averaged model buffers, if any), its version and the
// counters a resumed run goes on from, in
// checkpoint.bin of the run directory. Written atomically (temp file, fsync, rename, fsync of
// the directory): a crash leaves the previous checkpoint or the new one, never half of one.
// The rules keep no state between updates beyond x~ and v (an open synchronous round is not
// saved: its contributors' exchanges are lost with the center and they rejoin).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tether {

struct Checkpoint {
    std::uint64_t fingerprint = 0;  // of the agreed settings: a checkpoint resumes only its own run
    std::uint64_t version = 0;
    std::uint64_t updates_applied = 0, exchanges = 0, rounds = 0, total_samples = 0;
    std::vector<float> x;
    std::vector<float> buffers;  // b~ (center/buffer_average.hpp); empty: the run has none
    // Per place (worker id), the samples it has trained as counted (center/place_records.hpp).
    std::map<std::uint32_t, std::uint64_t> places;
};

// Little-endian layout: "TETHCKPT", format (u32), fingerprint, version, updates_applied,
// exchanges, rounds, total_samples, element count, buffer element count, place count (u64
// each), then x~'s float32 elements, then b~'s, then each place's id and samples (u64 each).
// Formats 1 (no buffer count, no b~) and 2 (no place count, no places) are still read: a
// resumed center then knows no place's record, and counts as before them.
void write_checkpoint(const std::string& path, const Checkpoint& checkpoint);
// Throws std::runtime_error naming the file and what is wrong (missing, truncated, foreign).
Checkpoint read_checkpoint(const std::string& path);

}  // namespace tether
