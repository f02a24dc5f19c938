// tether::load_checkpoint: a run directory's checkpoint as x~, its version and b~, for a user
// who wants the model of a run (tether.torch turns it into a state_dict).
#include <tether/tether.hpp>

#include <filesystem>

#include "center/checkpoint.hpp"
#include "record/server_records.hpp"

namespace tether {

namespace {

CenterSnapshot snapshot_of(Checkpoint c) { return {std::move(c.x), c.version, std::move(c.buffers)}; }

}  // namespace

CenterSnapshot load_checkpoint(const std::string& path) {
    if (!std::filesystem::is_directory(path)) return snapshot_of(read_checkpoint(path));
    const std::string single = checkpoint_path(path, 1, 0);
    if (std::filesystem::exists(single) || !std::filesystem::exists(checkpoint_path(path, 2, 0)))
        return snapshot_of(read_checkpoint(single));  // names the file when there is none
    // One checkpoint per server (cluster.servers > 1): their server ranges, in order, make x~;
    // server 0's version and b~ are the run's.
    CenterSnapshot whole;
    for (std::size_t k = 0; std::filesystem::exists(checkpoint_path(path, 2, k)); ++k) {
        const Checkpoint c = read_checkpoint(checkpoint_path(path, 2, k));
        whole.x.insert(whole.x.end(), c.x.begin(), c.x.end());
        if (k == 0) {
            whole.version = c.version;
            whole.buffers = c.buffers;
        }
    }
    return whole;
}

}  // namespace tether
