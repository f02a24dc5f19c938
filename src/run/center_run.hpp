// The center side of a distributed run, shared by embedded and local runs and by
// `tether server`: the Center on its endpoint, an evaluation thread that scores snapshots of
// x~ (the first at t = 0) on the validation split, one evaluation of the final x~ on the test
// set, and the run directory.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "transport/transport.hpp"

namespace tether {

class CenterRun {
public:
    // Binds `address` on `transport`; the address workers should use is address().
    // Writes directory/checkpoint.bin every cluster.checkpoint_seconds and at the end; with
    // `resume`, starts from the checkpoint already there (x~, version, counters).
    CenterRun(const RunConfig& config, const TrainTestSplit& data, Transport& transport, const std::string& address,
              const std::string& directory, bool resume = false);
    ~CenterRun();

    std::string address() const;
    // Serves until all workers are done, evaluates x~ a last time, writes summary.json and
    // returns it.
    nlohmann::json serve();
    // Asks serve() to stop early (thread-safe).
    void stop();

private:
    struct State;
    std::unique_ptr<State> state_;
};

// What the model of a config looks like to the protocol: its size, the settings both sides
// must agree on and their fingerprint, and the seeded starting point x~(0) that every worker
// also starts from.
struct ModelIdentity {
    std::size_t num_parameters = 0;
    nlohmann::json agreed;  // run/agreed_settings.hpp
    std::uint64_t fingerprint = 0;
    std::vector<float> initial;
    std::string description;
};
ModelIdentity model_identity(const RunConfig& config, const Dataset& train);

}  // namespace tether
