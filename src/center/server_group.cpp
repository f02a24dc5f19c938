#include "center/server_group.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace tether {

ServerGroup::ServerGroup(std::vector<GroupMember> members, bool fragments)
    : members_(std::move(members)), fragments_(fragments) {}

ServerGroup::~ServerGroup() = default;

std::string ServerGroup::address() const {
    std::string joined;
    for (const auto& m : members_) joined += (joined.empty() ? "" : ",") + m.center->address();
    return joined;
}

void ServerGroup::serve(const std::function<void()>& thread_setup) {
    std::mutex failure_mutex;
    std::exception_ptr failure;
    auto run = [&](Center& center) {
        try {
            center.serve();
        } catch (...) {
            {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
            }
            stop();  // the others would wait for workers that this server's failure stops
        }
    };
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < members_.size(); ++i)
        threads.emplace_back([&, i] {
            if (thread_setup) thread_setup();
            run(*members_[i].center);
        });
    run(*members_.front().center);
    for (auto& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
}

void ServerGroup::stop() {
    for (auto& m : members_) m.center->stop();
}

void ServerGroup::lose_process(const std::string& peer_prefix, const std::string& why) {
    for (auto& m : members_) m.center->lose_process(peer_prefix, why);
}

std::vector<std::uint64_t> ServerGroup::copy_ranges(float* x, std::size_t skip, std::vector<float>* buffers) const {
    std::vector<std::uint64_t> versions;
    for (std::size_t i = 0; i < members_.size(); ++i) {
        if (i == skip) {
            versions.push_back(members_[i].center->live_version());
            continue;
        }
        const CenterState state =
            members_[i].center->snapshot_now(i == 0 ? buffers : nullptr);
        std::memcpy(x + members_[i].range.first, state.x.data(), state.x.size() * sizeof(float));
        versions.push_back(state.version);
    }
    return versions;
}

CenterStats ServerGroup::stats_now() const {
    std::vector<CenterStats> all;
    for (const auto& m : members_) all.push_back(m.center->stats_now());
    return combine(all, fragments_);
}

CenterStats ServerGroup::stats() const {
    std::vector<CenterStats> all;
    for (const auto& m : members_) all.push_back(m.center->stats());
    return combine(all, fragments_);
}

CenterStats combine(const std::vector<CenterStats>& servers, bool fragments) {
    CenterStats out = servers.front();
    for (std::size_t i = 1; i < servers.size(); ++i) {
        const CenterStats& s = servers[i];
        if (fragments) {
            out.exchanges += s.exchanges;
            out.rounds += s.rounds;
            out.updates_applied += s.updates_applied;
        }
        for (const auto& [code, count] : s.rejected) out.rejected[code] += count;
        out.bytes_received += s.bytes_received;
        out.bytes_sent += s.bytes_sent;
        out.replies_dropped += s.replies_dropped;
        out.staleness_sum += s.staleness_sum;
        out.staleness_count += s.staleness_count;
        out.staleness_max = std::max(out.staleness_max, s.staleness_max);
        out.rolled_back_updates = std::max(out.rolled_back_updates, s.rolled_back_updates);  // server 0's versions first
    }
    return out;
}

std::string ServerGroup::final_missing() const {
    for (const auto& m : members_)
        if (!m.center->final_missing().empty()) return m.center->final_missing();
    return "";
}

}  // namespace tether
