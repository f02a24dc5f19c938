// The worker side of a distributed run, shared by embedded threads, local worker processes
// and `tether worker`.
#pragma once

#include <string>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "transport/transport.hpp"
#include "worker/worker_node.hpp"

namespace tether {

// Joins the servers at `address` (cluster.servers addresses separated by ',', server 0 first),
// takes shard (worker id mod N) of the training set, trains and returns what it did.
// `threads` is this worker's share of the CPU cores. Under a `launcher` the shard follows the
// rank (rank k, or k - 1 when rank 0 does not train) and the GPU the local rank.
WorkerResult run_worker(const RunConfig& config, const TrainTestSplit& data, Transport& transport,
                        const std::string& address, const std::string& identity, int threads,
                        const Launcher* launcher = nullptr);

}  // namespace tether
