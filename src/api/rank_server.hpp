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
//
// Rank 0 lost: rank 1 stands in for it. Its worker keeps what it pulls of range 0, and its
// server keeps a second directory (every server's address, as rank 0's listed them); the
// first of rank 1's worker and the others' to find server 0 silent has range 0 served on at
// rank 1 the same way (the others ask rank 1 where it went), and rank 1's wait() then does what
// rank 0's would: the final fetch of every range, which lets the servers leave, the run's
// verdict and x~ whole. b~ (model buffers) starts again there from rank 1's initial buffers.
#pragma once

#include <atomic>
#include <chrono>
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
    // `buffers`: this rank's initial model buffers (b~(0)), which a range 0 taken over holds.
    RankServer(std::shared_ptr<Transport> transport, const ServiceOptions& options, const ClusterSettings& settings,
               const std::vector<ServerIdentity>& identities, const std::vector<float>& initial,
               std::vector<float> buffers = {});
    ~RankServer();  // stops the ranges it took over

    // What this rank's server is told besides the settings: the directory (server 0, and rank
    // 1's second one); wait for server 0's final request before leaving (the others).
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

    // rank_takeover.cpp. This rank's worker lost server k at `lost`: where its range is served
    // now, or "" while that is not known (ask again). Its stand-in (rank 0 for k > 0, rank 1
    // for k = 0) takes it over from `pulled` (what its worker last pulled there); the others
    // ask the stand-in's directory.
    std::string successor(std::size_t k, const std::string& lost, const PulledRange& pulled);
    // Whether this rank's worker keeps what it pulls of range k: it stands in for server k.
    bool keeps_pulled(std::size_t k) const { return stands_in_for(k); }
    // This rank's worker, finished: what it last pulled of range k (keeps_pulled(k)). A worker
    // asking this rank's directory where a lost range went then has it taken over from this
    // copy at once.
    void keep_final_pulled(std::size_t k, PulledRange pulled);
    // The ranges this rank took over: which, from what version, when.
    struct Move {
        std::size_t server = 0;
        std::uint64_t version = 0;
        std::chrono::steady_clock::time_point at;
    };
    std::vector<Move> moves() const {
        std::lock_guard<std::mutex> lock(takeover_mutex_);
        return moves_;
    }
    // Rank 1, once it took range 0 over (rank 0 was lost): it ends the run in rank 0's stead.
    bool serves_center() const { return serves_center_.load(); }
    // Rank 1, serving range 0, once the workers are done: the final fetch of every range (also
    // its own server's, which leaves on it), kept in `record_directory` as rank 0 keeps it;
    // returns x~ whole, range 0's version and b~. Once.
    CenterSnapshot end_as_center(const std::string& record_directory);

private:
    // Who serves a lost range on: rank 0 the others', rank 1 rank 0's.
    bool stands_in_for(std::size_t k) const { return options_.rank == (k == 0 ? 1 : 0); }
    std::string take_over(std::size_t k, const PulledRange& pulled);
    // Every server's address as the others reach it, this rank's too (`joined`: addresses()).
    std::vector<std::string> reachable_list(const std::string& joined) const;
    std::unique_ptr<RemoteRanges> make_others();

    std::shared_ptr<Transport> transport_;
    ServiceOptions options_;
    ClusterSettings settings_;
    std::vector<ServerIdentity> identities_;
    std::uint64_t initial_hash_ = 0;
    std::vector<float> buffers_;                  // b~(0), for a range 0 taken over
    std::shared_ptr<ServerDirectory> directory_;  // rank 0, and rank 1's second one
    std::mutex addresses_mutex_;                  // addresses_ (a worker's connect waits on the directory)
    std::string addresses_;                       // once known
    std::mutex fetch_mutex_;                      // others_ and final_ (snapshot() and wait())
    std::shared_ptr<const ServerTokens> tokens_;  // this rank's server's, shown in the final fetch (rank 0; rank 1 as center)
    std::unique_ptr<RemoteRanges> others_;        // rank 0
    std::vector<float> final_;                    // rank 0, after the final fetch
    std::atomic<bool> others_moved_{false};       // a range moved: others_ connects anew
    bool moved_ = false;
    std::atomic<bool> serves_center_{false};      // rank 1: range 0 taken over
    std::unique_ptr<RemoteRanges> ended_;         // rank 1's final fetch as center: lingers for the receipts

    struct TakenRange {
        std::unique_ptr<ServerGroup> group;
        std::string address;
        std::thread thread;
    };
    mutable std::mutex takeover_mutex_;          // taken_, moves_, final_pulled_, asks_
    std::vector<Move> moves_;
    std::map<std::size_t, TakenRange> taken_;    // the ranges it serves for lost ranks
    std::map<std::size_t, PulledRange> final_pulled_;  // once its worker finished
    struct Ask {
        std::unique_ptr<Channel> channel;
        std::uint64_t sequence = 0;
    };
    std::map<std::size_t, Ask> asks_;  // a channel to the stand-in's directory per lost server
};

}  // namespace tether
