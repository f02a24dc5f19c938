// The run directory's files of the servers one process runs (center/server_group.hpp): their
// checkpoints (checkpoint.bin, or checkpoint-server-K.bin per server when cluster.servers > 1),
// written every cluster.checkpoint_seconds and when each server is done, and resumed from; and
// exchanges.jsonl, one line per reply. The tether command's CenterRun and the embedding API's
// run directory (src/api/service_record.hpp) both keep theirs here.
#pragma once

#include <cstdint>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "center/remote_ranges.hpp"
#include "center/server_group.hpp"
#include "cluster/agreed_settings.hpp"

namespace tether {

// `directory`/checkpoint.bin with one server, else `directory`/checkpoint-server-K.bin.
std::string checkpoint_path(const std::string& directory, std::size_t servers, std::size_t server);
// Whether server K's checkpoint in `directory` is there to go on from: it exists, and no run
// ended there after it was written (a summary.json newer than it: that run is over, and a
// restarted attempt or a standby must not take its state for this run's).
bool resumable_checkpoint(const std::string& directory, std::size_t servers, std::size_t server);
// Where server K > 0 of a server on every rank keeps its records inside the run directory the
// ranks share (or the same path on its own host): `run_dir`/server-K.
std::string rank_server_directory(const std::string& run_dir, std::size_t server);
// Where server 0 keeps server K's final range as it received it: `directory`/final-server-K.bin.
std::string final_range_path(const std::string& directory, std::size_t server);
// Server 0's copies of the other servers' final ranges (`x`: x~'s full size, as the final fetch
// of `ranges` left it), so that the run directory of the process that ends the run holds the
// whole model where the servers ran on hosts of their own (tether::load_checkpoint reads them;
// a resume reads each server's own checkpoint only). A file that cannot be written is said on
// stderr: the run's verdict does not depend on it.
void write_final_ranges(const std::string& directory, const RemoteRanges& ranges, const float* x);

class ServerRecords {
public:
    // Hooks every member of `group` (identities: all cluster.servers servers, by index) to write
    // its checkpoint and its exchanges into `directory`. With `resume`, each member first goes on
    // from its own checkpoint; one written by another run (fingerprint or size) is refused with
    // a ConfigError naming the file and `how_to_resume` (what the user should do instead).
    // Must outlive the group's serve().
    ServerRecords(ServerGroup& group, const std::vector<ServerIdentity>& identities, const std::string& directory,
                  bool resume, const std::string& how_to_resume);

    // "resumed from PATH at center version V (N samples; written T s ago: what x~ gained after
    // it is lost)", one line per server resumed.
    const std::vector<std::string>& resumed() const { return resumed_; }
    // The oldest resumed checkpoint's age when it was read: the seconds of training the resume
    // rolled back, at most. Unset when nothing was resumed.
    std::optional<double> checkpoint_age() const { return checkpoint_age_; }
    void flush();

private:
    std::mutex mutex_;  // the servers' threads share the exchange log
    std::ofstream exchanges_;
    std::vector<std::string> resumed_;
    std::optional<double> checkpoint_age_;
};

}  // namespace tether
