// The embedding API's side of a server on every rank (ServiceOptions.server_placement "ranks";
// docs/architecture.md, "Servers on the ranks"): a CenterService that runs this rank's server
// only. Rank 0's keeps the directory where the ranks say where their servers listen, and
// gathers x~ from the other ranks' servers for snapshot() and wait(); every rank's worker
// connects to all servers once the directory is complete, its own in-process (inproc://).
//
// A rank lost with its server (silent for worker_timeout_ms) does not take its range with it:
// rank 0's worker, the first to find the server silent, has its session's last pulled copy of
// that range serve on at rank 0 (rank_takeover.cpp), at the version it pulled; the directory
// says where it moved, and the other ranks' workers fail over there. What the lost server had
// gained since rank 0's last pull is lost (for a synchronous rule, at most the round under way;
// for an asynchronous one, at most rank 0's window), and so is the outer optimizer's state of
// that range (momentum restarts from zero). A lost rank that comes back rejoins as a worker.
// Once rank 0's worker has finished, a worker asking server 0 where a lost range went has rank
// 0 take it over from the copy its worker last pulled (older: the rounds since are lost too).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <tether/tether.hpp>

#include "center/center_options.hpp"
#include "center/remote_ranges.hpp"
#include "center/server_directory.hpp"
#include "center/server_group.hpp"
#include "cluster/cluster_settings.hpp"
#include "worker/server_session.hpp"

namespace tether {

class RankServer {
public:
    // Checks the options (ConfigError naming ServiceOptions.KEY): a tcp:// address to bind, a
    // rank below servers, server 0's and this rank's addresses, and keys or insecure (the
    // directory is taken only from trusted peers). `initial`: this rank's x~(0), whole.
    RankServer(std::shared_ptr<Transport> transport, const ServiceOptions& options, const ClusterSettings& settings,
               const std::vector<ServerIdentity>& identities, const std::vector<float>& initial);
    ~RankServer();  // stops the ranges it took over

    // What this rank's server is told besides the settings: the directory (server 0); wait
    // for server 0's final request before leaving (the others).
    void adjust(CenterOptions& center, std::size_t index) const;
    // Once the group serves: rank 0 fetches the other ranges as a worker would, with its tokens.
    void attach(ServerGroup& group);
    // Every server's address, server 0 first, joined by ','; this rank's own as bound (`own`:
    // tcp://* is reached over the loopback), server 0 where this rank reached it. Blocks until
    // every rank has said where it is.
    std::string addresses(const std::string& own);
    // After addresses(): a survivor serves this rank's range (it was lost and came back), and its
    // own server has none to serve.
    bool moved() const { return moved_; }
    // Rank k > 0 before its server binds, unless it resumes: whether it comes back to a run
    // under way (it was lost and restarted), and so waited for rank 0 to take its range over
    // (worker/directory_request.hpp come_back). Then its server must not serve from x~(0), and
    // addresses() is that list.
    bool comes_back();
    // Rank 0: writes the other ranks' ranges of x~ into x (x~'s full size): now, or (`final`)
    // once their workers are done, which lets their servers leave; after the final fetch, its
    // ranges. Other ranks: throws, naming rank 0.
    void fetch_others(float* x, bool final);

    // rank_takeover.cpp. This rank's worker lost server k (k > 0) at `lost`: where its range is
    // served now, or "" while that is not known (ask again). Rank 0 takes it over from `pulled`
    // (what its worker last pulled there); the others ask rank 0's directory.
    std::string successor(std::size_t k, const std::string& lost, const PulledRange& pulled);
    // Rank 0's worker keeps what it pulls of every range: a successor seeds from it.
    bool keeps_pulled() const { return options_.rank == 0; }
    // Rank 0's worker, finished: what it last pulled of range k. A worker asking server 0 where
    // a lost range went then has rank 0 take it over from this copy at once.
    void keep_final_pulled(std::size_t k, PulledRange pulled);

private:
    std::string take_over(std::size_t k, const PulledRange& pulled);
    std::unique_ptr<RemoteRanges> make_others();

    std::shared_ptr<Transport> transport_;
    ServiceOptions options_;
    ClusterSettings settings_;
    std::vector<ServerIdentity> identities_;
    std::uint64_t initial_hash_ = 0;
    std::shared_ptr<ServerDirectory> directory_;  // rank 0
    std::mutex addresses_mutex_;                  // addresses_ (a worker's connect waits on the directory)
    std::string addresses_;                       // once known
    std::mutex fetch_mutex_;                      // others_ and final_ (snapshot() and wait())
    std::shared_ptr<const ServerTokens> tokens_;  // rank 0: server 0's, shown in the final fetch
    std::unique_ptr<RemoteRanges> others_;        // rank 0
    std::vector<float> final_;                    // rank 0, after the final fetch
    std::atomic<bool> others_moved_{false};       // a range moved: others_ connects anew
    bool moved_ = false;

    struct TakenRange {
        std::unique_ptr<ServerGroup> group;
        std::string address;
        std::thread thread;
    };
    std::mutex takeover_mutex_;                  // taken_, asks_
    std::map<std::size_t, TakenRange> taken_;    // rank 0: the ranges it serves for lost ranks
    std::map<std::size_t, PulledRange> final_pulled_;  // rank 0, once its worker finished
    struct Ask {
        std::unique_ptr<Channel> channel;
        std::uint64_t sequence = 0;
    };
    std::map<std::size_t, Ask> asks_;  // the other ranks: a channel to rank 0's directory per lost server
};

}  // namespace tether
