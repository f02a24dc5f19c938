// tether::load_checkpoint: a run directory's checkpoint as x~, its version and b~, for a user
// who wants the model of a run (tether.torch turns it into a state_dict).
#include <tether/tether.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "api/service_record.hpp"
#include "center/checkpoint.hpp"
#include "record/server_records.hpp"

namespace tether {

namespace {

CenterSnapshot snapshot_of(Checkpoint c) { return {std::move(c.x), c.version, std::move(c.buffers)}; }

// cluster.servers as the run directory's config.json says (0: no such file or key).
std::size_t servers_of(const std::string& directory) {
    std::ifstream in(directory + "/config.json");
    if (!in) return 0;
    const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    const auto servers = "/cluster/servers"_json_pointer;
    return config.is_object() && config.contains(servers) && config[servers].is_number_unsigned()
               ? config[servers].get<std::size_t>()
               : 0;
}

// Server k's range: the newest (highest version) of its own checkpoint in the directory, the one
// its rank wrote in `server-k/` (servers on the ranks, sharing the directory), and server 0's
// copy of its final range.
Checkpoint range_of(const std::string& directory, std::size_t servers, std::size_t k) {
    const std::vector<std::string> places = {checkpoint_path(directory, servers, k),
                                             checkpoint_path(rank_server_directory(directory, k), servers, k),
                                             final_range_path(directory, k)};
    std::optional<Checkpoint> newest;
    for (const std::string& path : places) {
        if (!std::filesystem::exists(path)) continue;
        Checkpoint c = read_checkpoint(path);
        if (!newest || c.version > newest->version) newest = std::move(c);
    }
    if (!newest)
        throw std::runtime_error(directory + ": no checkpoint of server " + std::to_string(k) + " of " + std::to_string(servers) +
                                 " (none of " + places[0] + ", " + places[1] + ", " + places[2] +
                                 "); with a server on every rank, rank " + std::to_string(k) + " writes " + places[1] +
                                 " on its own host (copy it here), and rank 0 writes " + places[2] + " when the run ends");
    return *newest;
}

}  // namespace

CenterSnapshot load_checkpoint(const std::string& path) {
    if (!std::filesystem::is_directory(path)) return snapshot_of(read_checkpoint(path));
    const std::string single = checkpoint_path(path, 1, 0);
    std::size_t servers = servers_of(path);
    if (servers == 0)  // no config.json: as many servers as there are files, in order
        while (std::filesystem::exists(checkpoint_path(path, 2, servers))) ++servers;
    if (servers <= 1 || std::filesystem::exists(single)) return snapshot_of(read_checkpoint(single));  // names the file when there is none
    // One checkpoint per server (cluster.servers > 1): their server ranges, in order, make x~;
    // server 0's version and b~ are the run's.
    CenterSnapshot whole;
    for (std::size_t k = 0; k < servers; ++k) {
        const Checkpoint c = range_of(path, servers, k);
        whole.x.insert(whole.x.end(), c.x.begin(), c.x.end());
        if (k == 0) {
            whole.version = c.version;
            whole.buffers = c.buffers;
        }
    }
    return whole;
}

bool has_checkpoint(const ServiceOptions& o) {
    if (o.run_dir.empty()) return false;
    const std::size_t servers = std::size_t(std::max<std::int64_t>(1, o.servers));
    const bool ranks = o.server_placement == "ranks";
    const std::size_t first = ranks ? std::size_t(o.rank) : 0, last = ranks ? first + 1 : servers;
    for (std::size_t k = first; k < last; ++k)
        if (!resumable_checkpoint(record_directory(o), servers, k)) return false;
    return true;
}

}  // namespace tether
