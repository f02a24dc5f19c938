// The embedding API's side of a server on every rank (ServiceOptions.server_placement "ranks";
// docs/architecture.md, "Servers on the ranks"): a CenterService that runs this rank's server
// only. Rank 0's keeps the directory where the ranks say where their servers listen, and
// gathers x~ from the other ranks' servers for snapshot() and wait(); every rank's worker
// connects to all servers once the directory is complete, its own in-process (inproc://).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <tether/tether.hpp>

#include "center/center_options.hpp"
#include "center/remote_ranges.hpp"
#include "center/server_directory.hpp"
#include "center/server_group.hpp"
#include "cluster/cluster_settings.hpp"

namespace tether {

class RankServer {
public:
    // Checks the options (ConfigError naming ServiceOptions.KEY): a tcp:// address to bind, a
    // rank below servers, server 0's and this rank's addresses, and keys or insecure (the
    // directory is taken only from trusted peers). `initial`: this rank's x~(0), whole.
    RankServer(const ServiceOptions& options, const ClusterSettings& settings, const std::vector<ServerIdentity>& identities,
               const std::vector<float>& initial);

    // What this rank's server is told besides the settings: the directory (server 0); wait
    // for server 0's final request before leaving (the others).
    void adjust(CenterOptions& center, std::size_t index) const;
    // Once the group serves: rank 0 fetches the other ranges as a worker would, with its tokens.
    void attach(Transport& transport, ServerGroup& group);
    // Every server's address, server 0 first, joined by ','; this rank's own as bound (`own`:
    // tcp://* is reached over the loopback), server 0 where this rank reached it. Blocks until
    // every rank has said where it is.
    std::string addresses(Transport& transport, const std::string& own);
    // Rank 0: writes the other ranks' ranges of x~ into x (x~'s full size): now, or (`final`)
    // once their workers are done, which lets their servers leave; after the final fetch, its
    // ranges. Other ranks: throws, naming rank 0.
    void fetch_others(float* x, bool final);

private:
    ServiceOptions options_;
    ClusterSettings settings_;
    std::vector<ServerIdentity> identities_;
    std::uint64_t initial_hash_ = 0;
    std::shared_ptr<ServerDirectory> directory_;  // rank 0
    std::mutex addresses_mutex_;                  // addresses_ (a worker's connect waits on the directory)
    std::string addresses_;                       // once known
    std::mutex fetch_mutex_;                      // others_ and final_ (snapshot() and wait())
    std::unique_ptr<RemoteRanges> others_;        // rank 0
    std::vector<float> final_;                    // rank 0, after the final fetch
};

}  // namespace tether
