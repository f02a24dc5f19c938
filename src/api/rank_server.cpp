#include "api/rank_server.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "record/server_records.hpp"
#include "util/errors.hpp"
#include "worker/directory_request.hpp"

namespace tether {

RankServer::RankServer(std::shared_ptr<Transport> transport, const ServiceOptions& o, const ClusterSettings& settings,
                       const std::vector<ServerIdentity>& identities, const std::vector<float>& initial,
                       std::vector<float> buffers)
    : transport_(std::move(transport)), options_(o), settings_(settings), identities_(identities),
      initial_hash_(initial_vector_hash(initial.data(), initial.size())), buffers_(std::move(buffers)) {
    const std::string ranks = "with ServiceOptions.server_placement \"ranks\"";
    if (o.rank < 0 || o.rank >= o.servers)
        throw ConfigError("ServiceOptions.rank: " + std::to_string(o.rank) + " " + ranks + " and " + std::to_string(o.servers) +
                          " servers (ServiceOptions.servers, one per rank); expected 0.." + std::to_string(o.servers - 1));
    if (o.address.rfind("tcp://", 0) != 0)
        throw ConfigError("ServiceOptions.address: \"" + o.address + "\" " + ranks + "; this rank's server binds a "
                          "tcp:// address the other ranks reach, e.g. tcp://*:29502");
    if (o.server0_address.rfind("tcp://", 0) != 0)
        throw ConfigError("ServiceOptions.server0_address: \"" + o.server0_address + "\" " + ranks +
                          "; give rank 0's server's address, tcp://HOST:PORT");
    if (o.rank_address.rfind("tcp://", 0) != 0)
        throw ConfigError("ServiceOptions.rank_address: \"" + o.rank_address + "\" " + ranks +
                          "; give where the other ranks reach this rank's server, tcp://HOST:PORT");
    if (!settings.security.enabled() && !settings.security.insecure)
        throw ConfigError("ServiceOptions.center_public_key: empty " + ranks + "; the ranks tell each other where their "
                          "servers listen only over CURVE (tether.launcher_keys) or with ServiceOptions.insecure");
    if (o.rank == 0) {
        directory_ = std::make_shared<ServerDirectory>(std::size_t(o.servers), initial_hash_);
        // Its own entry at once: a snapshot() before this rank's worker connects waits for the
        // other ranks only.
        directory_->enter(0, o.rank_address, initial_hash_);
    }
    // Rank 1's second directory, filled once it knows where every server is (addresses()):
    // the others ask it where range 0 went when rank 0 is lost.
    if (o.rank == 1) directory_ = std::make_shared<ServerDirectory>(std::size_t(o.servers), initial_hash_);
}

void RankServer::adjust(CenterOptions& center, std::size_t index) const {
    if (index == std::size_t(options_.rank)) center.directory = directory_;
    center.end.await_final_snapshot = index > 0;  // server 0, in rank 0's process, fetches it
}

void RankServer::attach(ServerGroup& group) {
    if (!directory_ || identities_.size() < 2) return;
    tokens_ = group.center(0).tokens();
    if (options_.rank == 0) others_ = make_others();
}

std::unique_ptr<RemoteRanges> RankServer::make_others() {
    std::vector<RemoteServer> remote;
    for (std::size_t i = 1; i < identities_.size(); ++i)
        remote.push_back({identities_[i].index, identities_[i].range, "", identities_[i].fingerprint});
    const std::shared_ptr<ServerDirectory> directory = directory_;
    const auto timeout = std::chrono::milliseconds(settings_.join_timeout_ms);
    return std::make_unique<RemoteRanges>(*transport_, std::move(remote), settings_.worker_transport("tcp://"),
                                          std::size_t(settings_.chunk_elements), int(settings_.join_timeout_ms), tokens_,
                                          [directory, timeout] { return directory->others(timeout); });
}

bool RankServer::comes_back() {
    if (options_.rank == 0 || options_.resume) return false;
    const std::string& server0 = options_.server0_address;
    const auto list = come_back(*transport_, server0, settings_.worker_transport(server0), identities_.front().fingerprint,
                                {std::size_t(options_.rank), options_.rank_address, initial_hash_},
                                int(settings_.center_restart_ms));
    if (!list) return false;
    std::lock_guard<std::mutex> lock(addresses_mutex_);
    addresses_ = *list;
    moved_ = true;
    return true;
}

std::string RankServer::addresses(const std::string& own) {
    std::lock_guard<std::mutex> lock(addresses_mutex_);
    if (!addresses_.empty()) return addresses_;
    const std::string& server0 = options_.server0_address;
    addresses_ = join_directory(*transport_, server0, settings_.worker_transport(server0), identities_.front().fingerprint,
                                {std::size_t(options_.rank), options_.rank_address, initial_hash_}, own,
                                int(settings_.join_timeout_ms));
    moved_ = addresses_.find(own) == std::string::npos;
    if (options_.rank == 1) directory_->copy(reachable_list(addresses_));  // every server where the others reach it
    return addresses_;
}

std::vector<std::string> RankServer::reachable_list(const std::string& joined) const {
    std::vector<std::string> all;
    for (std::size_t at = 0; at <= joined.size();) {
        const std::size_t comma = std::min(joined.find(',', at), joined.size());
        all.push_back(joined.substr(at, comma - at));
        at = comma + 1;
    }
    // This rank's own is in-process in the list its worker takes.
    if (std::size_t(options_.rank) < all.size() && all[std::size_t(options_.rank)].rfind("inproc://", 0) == 0)
        all[std::size_t(options_.rank)] = options_.rank_address;
    return all;
}

void RankServer::fetch_others(float* x, bool final) {
    std::lock_guard<std::mutex> lock(fetch_mutex_);
    if (options_.rank > 0)
        throw std::runtime_error("CenterService of rank " + std::to_string(options_.rank) + ": this rank serves its own range "
                                 "of x~ only (server_placement \"ranks\"); x~ is rank 0's snapshot()");
    if (!others_) return;
    if (others_moved_.exchange(false)) others_ = make_others();  // a range served elsewhere now
    if (final && final_.empty()) {  // once: the other servers leave on it
        std::vector<float> all(identities_.back().range.first + identities_.back().range.count);
        others_->fetch(all.data(), true);
        if (!options_.run_dir.empty()) write_final_ranges(options_.run_dir, *others_, all.data());
        final_ = std::move(all);
    }
    if (final_.empty()) return others_->fetch(x, false);
    if (x)  // the others have left: their final ranges
        for (std::size_t i = 1; i < identities_.size(); ++i)
            std::memcpy(x + identities_[i].range.first, final_.data() + identities_[i].range.first,
                        identities_[i].range.count * sizeof(float));
}

}  // namespace tether
