// The center side of a distributed run, shared by embedded and local runs and by
// `tether server`: the servers of x~ this process runs (center/server_group.hpp), an
// evaluation thread that scores snapshots of x~ (the first at t = 0) on the validation split,
// one evaluation of the final x~ on the test set, and the run directory.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "run/model_identity.hpp"
#include "transport/transport.hpp"

namespace tether {

// Which of the S = cluster.servers servers of x~ this process runs, and where the others are.
struct ServerPlan {
    std::vector<std::string> bind;    // one address per server run here, servers first, first + 1, ...
    std::size_t first = 0;            // K with `tether server --server K/S`, else 0
    std::vector<std::string> remote;  // server 0 alone here (--server 0/S): the addresses of servers 1..S-1
    // Embedded and local runs: tether started the workers and none is ever restarted, so a center
    // whose workers all went silent concludes at once (no cluster.center_restart_ms wait).
    bool workers_started_here = false;
    // A server on every rank (cluster.server_placement "ranks"): server K = this rank's; server 0
    // keeps the directory the ranks tell where their servers listen, and learns `remote` from it.
    bool on_ranks = false;
    // With on_ranks: this rank's server is also bound here (inproc://), where the rank's own
    // worker reaches it without a socket (TransportOptions::inproc_alias).
    std::string inproc_alias = "";
};

class CenterRun {
public:
    // Binds the plan's addresses on `transport`; the addresses workers should use are
    // address(). Server 0 evaluates x~ (fetching the ranges served elsewhere); a server K > 0
    // run alone only serves, and writes its own statistics. Checkpoints: checkpoint.bin (one
    // server) or checkpoint-server-K.bin in `directory`, every cluster.checkpoint_seconds and at
    // the end; with `resume`, every server starts from its own.
    CenterRun(const RunConfig& config, const TrainTestSplit& data, Transport& transport, ServerPlan plan,
              const std::string& directory, bool resume = false);
    ~CenterRun();

    // The servers' addresses joined by ',', as `tether worker --connect` takes them.
    std::string address() const;
    // The model as the protocol sees it: x~(0) and each server's range and fingerprint.
    const ModelIdentity& identity() const;
    // Serves until all workers are done, evaluates x~ a last time (server 0), writes
    // summary.json and returns it.
    nlohmann::json serve();
    // Asks serve() to stop early (thread-safe).
    void stop();
    // ServerGroup::lose_process: a worker process this run started has ended.
    void lose_process(const std::string& peer_prefix, const std::string& why);

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace tether
