// A lost rank's range served on (api/rank_server.hpp): rank 0 from what its worker last pulled
// there, the other ranks told where by rank 0's directory.
#include "api/rank_server.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "center/center_settings.hpp"
#include "center/checkpoint.hpp"
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
            std::fprintf(stderr, "rank 0: could not take the range of server %zu over: %s\n", lost, e.what());
        }
    });
}

std::string RankServer::successor(std::size_t k, const std::string& lost, const PulledRange& pulled) {
    if (k == 0 || k >= identities_.size())
        throw std::logic_error("RankServer::successor: server " + std::to_string(k) + " is not another rank's");
    if (options_.rank == 0) return take_over(k, pulled);
    std::lock_guard<std::mutex> lock(takeover_mutex_);
    Ask& ask = asks_[k];
    const std::string& server0 = options_.server0_address;
    if (!ask.channel) ask.channel = transport_->connect(server0, unique_peer_identity("directory"), settings_.worker_transport(server0));
    return moved_server(*ask.channel, server0, identities_.front().fingerprint, k, lost, initial_hash_, ++ask.sequence);
}

std::string RankServer::take_over(std::size_t k, const PulledRange& pulled) {
    std::lock_guard<std::mutex> lock(takeover_mutex_);
    if (const auto it = taken_.find(k); it != taken_.end()) return it->second.address;
    // Its rank came back since the silence began (a supervisor restarted it): its own server
    // goes on there, from its checkpoint, and the sessions hear from it again. Serving the range
    // here as well would split it in two.
    if (directory_->entered_within(k, std::chrono::milliseconds(settings_.worker_timeout_ms))) return {};
    const ServerIdentity& server = identities_.at(k);
    if (pulled.x.size() != server.range.count)
        throw std::logic_error("RankServer::take_over: rank 0's worker kept " + std::to_string(pulled.x.size()) +
                               " elements of server " + std::to_string(k) + "'s range of " + std::to_string(server.range.count));
    std::vector<float> x(identities_.back().range.first + identities_.back().range.count);
    std::copy(pulled.x.begin(), pulled.x.end(), x.begin() + std::ptrdiff_t(server.range.first));
    TakenRange taken;
    taken.group = make_servers(settings_, *transport_, {"tcp://*:*"}, k, identities_, x, [&](CenterOptions& c, std::size_t) {
        c.end.center_restart_ms = 0;
        c.end.await_final_snapshot = true;  // rank 0's final fetch takes it, as from the lost rank
        // A resumed server waits for every place to come back before it may end; the lost rank's
        // worker never does. The others fail over within worker_timeout_ms of losing its server,
        // as rank 0's worker did: twice that is their window to join here.
        c.membership.join_timeout_ms = std::min(c.membership.join_timeout_ms, 2 * c.membership.worker_timeout_ms);
    });
    Checkpoint state;
    state.fingerprint = server.fingerprint;
    state.version = pulled.version;
    state.x = pulled.x;
    taken.group->center(0).resume(state);
    taken.address = reachable(options_.rank_address, taken.group->address());
    std::fprintf(stderr, "rank 0: server %zu (rank %zu) is silent; serving its range here at %s from version %llu, as "
                 "this rank last pulled it (what it gained since, and its outer optimizer's state, are lost)\n",
                 k, k, taken.address.c_str(), static_cast<unsigned long long>(pulled.version));
    ServerGroup* group = taken.group.get();
    taken.thread = std::thread([group, k] {
        try {
            group->serve();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "rank 0: the range of server %zu it took over failed: %s\n", k, e.what());
        }
    });
    directory_->move(k, taken.address);
    others_moved_ = true;
    return taken_.emplace(k, std::move(taken)).first->second.address;
}

}  // namespace tether
