// A sweep file: {"base": CONFIG_PATH_OR_OBJECT, "grid": {KEY: [VALUES...]}, "points":
// [{KEY: VALUE, ...}, ...], "repeats": R, "reference": {KEY: VALUE, ...}, "name": NAME}. Every
// combination of the grid, each with every point (keys that vary together, such as tau = N and
// 2N), R times with seeds training.seed + r, is one run; the reference run is the one every other is compared
// with (temporal efficiency). load_sweep() checks every run's config before anything runs.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tether {

struct SweepRun {
    std::string id;  // directory name, e.g. strategy.name=adag,cluster.workers=4,repeat=0
    std::vector<std::pair<std::string, nlohmann::json>> assignments;  // grid key -> value
    int repeat = 0;
    bool is_reference = false;
    nlohmann::json document;  // the run's full config
};

struct SweepPlan {
    std::string name;
    std::vector<std::string> keys;  // the grid keys, in file order
    std::vector<SweepRun> runs;
    std::optional<std::size_t> reference;  // index into runs of repeat 0's reference
    // The reference run for `run` (same repeat when there is one), if any.
    std::optional<std::size_t> reference_for(const SweepRun& run) const;
};

// What the command line changes in a sweep file: `--set KEY=VALUE` assignments applied to the
// base of every run (before the grid), and `--repeats` replacing the file's repeats.
struct SweepOverrides {
    std::vector<std::string> assignments;
    std::optional<int> repeats;
};

// Throws ConfigError naming the sweep file, the key and the value that is wrong.
SweepPlan load_sweep(const std::string& path, const SweepOverrides& overrides = {});

}  // namespace tether
