// The servers of x~ one process serves (cluster.servers): all S of them in embedded and local
// runs and in the embedding API, one with `tether server --server K/S`. Each is a Center owning
// a contiguous server range, with its own endpoint, rule, rounds and versions, on its own thread;
// the group serves them together and gives one view over them: x~ copied from every range it
// holds, and the statistics combined.
//
// Consistency: each range is copied between two of its server's updates, but the servers are
// copied one after the other, so an assembled x~ may hold one range after an exchange and
// another before it (the exchanges in flight while it is taken, at most one per worker).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "center/center.hpp"
#include "protocol/server_ranges.hpp"

namespace tether {

struct GroupMember {
    std::unique_ptr<Center> center;
    std::size_t index = 0;  // server k of S
    ServerRange range;
};

class ServerGroup {
public:
    // `fragments`: each exchange reaches one server (streaming DiLoCo), so the statistics add
    // the servers' exchanges, rounds and updates up.
    explicit ServerGroup(std::vector<GroupMember> members, bool fragments = false);
    bool fragments() const { return fragments_; }
    ~ServerGroup();

    std::size_t size() const { return members_.size(); }
    const GroupMember& member(std::size_t i) const { return members_[i]; }
    Center& center(std::size_t i) { return *members_[i].center; }
    // The members' addresses, in order, separated by ',' (as workers connect to them).
    std::string address() const;

    // Serves every member, each on a thread of its own (the first on the calling thread), until
    // all are done; `thread_setup` runs first on each new thread (the float mode). When one
    // fails, the others are stopped and the first failure is rethrown.
    void serve(const std::function<void()>& thread_setup = {});
    void stop();
    // Center::lose_process on every server here.
    void lose_process(const std::string& peer_prefix, const std::string& why);

    // Writes each member's x~ into its range of `x` (x~'s full size), taken now; skips member
    // `skip` (one whose state the caller already has). Returns each member's version.
    // `buffers`: b~ too, taken with the first member's range (server 0 holds the buffers; not skipped).
    std::vector<std::uint64_t> copy_ranges(float* x, std::size_t skip = ~std::size_t(0),
                                           std::vector<float>* buffers = nullptr) const;
    // The members' statistics, combined (below); safe while they serve.
    CenterStats stats_now() const;
    // Once serve() has returned.
    CenterStats stats() const;
    // Once serve() has returned: why server 0 may lack a member's final range ("" for none).
    std::string final_missing() const;

private:
    std::vector<GroupMember> members_;
    bool fragments_ = false;
};

// Statistics of several servers of one x~, as one: what describes the workers (joined,
// finished, lost, samples, exchanges, rounds, updates, late reports) is the first server's, since
// every worker exchange reaches every server; with `fragments` (streaming DiLoCo) an exchange
// reaches one server, and exchanges, rounds and updates add up. Traffic and rejections add up;
// staleness is pooled over every server's exchanges.
CenterStats combine(const std::vector<CenterStats>& servers, bool fragments);

}  // namespace tether
