// A lost rank's range served on (api/rank_server.hpp): by its stand-in (rank 0; rank 1 for rank
// 0's) from what the stand-in's worker last pulled there, the other ranks told where by the
// stand-in's directory; and rank 1 ending the run in a lost rank 0's stead.
#include "api/rank_server.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "center/center_settings.hpp"
#include "center/checkpoint.hpp"
#include "record/server_records.hpp"
#include "transport/peer_identity.hpp"
#include "util/errors.hpp"
#include "worker/directory_request.hpp"

namespace tether {

namespace {

// "tcp://HOST:PORT" -> HOST; `bound` ("tcp://0.0.0.0:PORT") -> PORT: where the others reach a
// server this rank bound on every interface.
std::string reachable(const std::string& rank_address, const std::string& bound) {
    const std::string host = rank_address.substr(0, rank_address.rfind(':'));
    return host + bound.substr(bound.rfind(':'));
}

}  // namespace

RankServer::~RankServer() {
    if (directory_) directory_->set_on_under_way({});
    std::lock_guard<std::mutex> lock(takeover_mutex_);
    for (auto& [k, taken] : taken_) taken.group->stop();
    for (auto& [k, taken] : taken_)
        if (taken.thread.joinable()) taken.thread.join();
}

void RankServer::keep_final_pulled(std::size_t k, PulledRange pulled) {
    std::lock_guard<std::mutex> lock(takeover_mutex_);
    const bool first = final_pulled_.empty();
    final_pulled_[k] = std::move(pulled);
    if (!first) return;
    directory_->set_on_under_way([this](std::size_t lost) {
        PulledRange copy;
        {
            std::lock_guard<std::mutex> held(takeover_mutex_);
            const auto it = final_pulled_.find(lost);
            if (it == final_pulled_.end() || it->second.x.empty()) return;
            copy = it->second;
        }
        try {
            take_over(lost, copy);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: could not take the range of server %zu over: %s\n", options_.rank, lost, e.what());
        }
    });
}

std::string RankServer::successor(std::size_t k, const std::string& lost, const PulledRange& pulled) {
    if (k == std::size_t(options_.rank) || k >= identities_.size())
        throw std::logic_error("RankServer::successor: server " + std::to_string(k) + " is not another rank's");
    if (stands_in_for(k)) return take_over(k, pulled);
    // The stand-in's directory: rank 0's, or for range 0 rank 1's (where its server listens).
    const std::size_t stand_in = k == 0 ? 1 : 0;
    std::string directory;
    {
        std::lock_guard<std::mutex> lock(addresses_mutex_);
        directory = stand_in == 0 ? options_.server0_address : reachable_list(addresses_).at(stand_in);
    }
    std::lock_guard<std::mutex> lock(takeover_mutex_);
    Ask& ask = asks_[k];
    if (!ask.channel)
        ask.channel = transport_->connect(directory, unique_peer_identity("directory"), settings_.worker_transport(directory));
    return moved_server(*ask.channel, directory, identities_.at(stand_in).fingerprint, k, lost, initial_hash_, ++ask.sequence);
}

std::string RankServer::take_over(std::size_t k, const PulledRange& pulled) {
    std::lock_guard<std::mutex> lock(takeover_mutex_);
    if (const auto it = taken_.find(k); it != taken_.end()) return it->second.address;
    // Its rank came back since the silence began (a supervisor restarted it): its own server
    // goes on there, from its checkpoint, and the sessions hear from it again. Serving the range
    // here as well would split it in two.
    // (Rank 1's copy of the directory takes no entries: it never hears rank 0 come back.)
    if (directory_->entered_within(k, std::chrono::milliseconds(settings_.worker_timeout_ms))) return {};
    const ServerIdentity& server = identities_.at(k);
    if (pulled.x.size() != server.range.count)
        throw std::logic_error("RankServer::take_over: rank " + std::to_string(options_.rank) + "'s worker kept " +
                               std::to_string(pulled.x.size()) +
                               " elements of server " + std::to_string(k) + "'s range of " + std::to_string(server.range.count));
    std::vector<float> x(identities_.back().range.first + identities_.back().range.count);
    std::copy(pulled.x.begin(), pulled.x.end(), x.begin() + std::ptrdiff_t(server.range.first));
    TakenRange taken;
    taken.group = make_servers(settings_, *transport_, {"tcp://*:*"}, k, identities_, x, [&](CenterOptions& c, std::size_t) {
        c.end.center_restart_ms = 0;
        c.end.await_final_snapshot = true;  // the stand-in's final fetch takes it, as from the lost rank
        // A resumed server waits for every place to come back before it may end; the lost rank's
        // worker never does. The others fail over within worker_timeout_ms of losing its server,
        // as rank 0's worker did: twice that is their window to join here.
        c.membership.join_timeout_ms = std::min(c.membership.join_timeout_ms, 2 * c.membership.worker_timeout_ms);
    });
    // Server 0 holds b~: taken over, it starts again from this rank's initial buffers.
    if (k == 0 && !buffers_.empty()) taken.group->center(0).hold_buffers(buffers_);
    Checkpoint state;
    state.fingerprint = server.fingerprint;
    state.version = pulled.version;
    state.x = pulled.x;
    taken.group->center(0).resume(state);
    taken.address = reachable(options_.rank_address, taken.group->address());
    std::fprintf(stderr, "rank %d: server %zu (rank %zu) is silent; serving its range here at %s from version %llu, as "
                 "this rank last pulled it (what it gained since, and its outer optimizer's state, are lost)%s\n",
                 options_.rank, k, k, taken.address.c_str(), static_cast<unsigned long long>(pulled.version),
                 k == 0 ? "; this rank ends the run in rank 0's stead: its wait() gives x~ and the verdict" : "");
    ServerGroup* group = taken.group.get();
    const int rank = options_.rank;
    taken.thread = std::thread([group, k, rank] {
        try {
            group->serve();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: the range of server %zu it took over failed: %s\n", rank, k, e.what());
        }
    });
    directory_->move(k, taken.address);
    moves_.push_back({k, pulled.version, std::chrono::steady_clock::now()});
    others_moved_ = true;
    if (k == 0) serves_center_ = true;
    return taken_.emplace(k, std::move(taken)).first->second.address;
}

CenterSnapshot RankServer::end_as_center(const std::string& record_directory) {
    std::vector<std::string> where;
    {
        std::lock_guard<std::mutex> lock(addresses_mutex_);
        where = reachable_list(addresses_);
    }
    {
        std::lock_guard<std::mutex> lock(takeover_mutex_);
        for (const auto& [k, taken] : taken_) where.at(k) = taken.address;
    }
    // Every range, this rank's own server's too: each leaves on the final request.
    std::vector<RemoteServer> remote;
    for (std::size_t i = 0; i < identities_.size(); ++i)
        remote.push_back({identities_[i].index, identities_[i].range, where.at(i), identities_[i].fingerprint});
    CenterSnapshot s;
    s.x.resize(identities_.back().range.first + identities_.back().range.count);
    std::lock_guard<std::mutex> lock(fetch_mutex_);
    ended_ = std::make_unique<RemoteRanges>(*transport_, std::move(remote), settings_.worker_transport("tcp://"),
                                            std::size_t(settings_.chunk_elements), int(settings_.join_timeout_ms), tokens_);
    ended_->fetch(s.x.data(), /*final=*/true);
    if (!record_directory.empty()) write_final_ranges(record_directory, *ended_, s.x.data());
    s.version = ended_->answered().front().version;  // server 0's, as rank 0's snapshot() gives it
    std::lock_guard<std::mutex> held(takeover_mutex_);
    taken_.at(0).group->center(0).snapshot_now(&s.buffers);  // b~: server 0 holds it
    return s;
}

}  // namespace tether
