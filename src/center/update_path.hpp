// The update path: x~, its version, the strategy's CenterRule over it, and each welcomed worker's
// two directions (its exchanges in, decoded by the payload codec; its replies out, through the
// reply codec). An asynchronous rule applies each complete exchange at once and writes its
// reply; a synchronous one collects the round's exchanges and, when Rounds says the round
// closes, closes it into one reply for every contributor. Counts what it applies (CenterStats'
// exchanges, updates, rounds, late reports, staleness); sends nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <tether/strategy.hpp>
#include "center/center_options.hpp"
#include "center/center_stats.hpp"
#include "center/center_worker.hpp"
#include "transport/payload.hpp"

namespace tether {

class UpdatePath {
public:
    UpdatePath(std::unique_ptr<CenterRule> rule, std::vector<float> initial, const UpdateOptions& options,
               CenterStats& stats);

    bool synchronous() const { return rule_->synchronous(); }
    const CenterState& state() const { return state_; }
    std::uint64_t version() const { return state_.version; }
    // x~ as the welcomes send it: one copy, which every welcome shares (the workers of a join
    // barrier, all welcomed at once, while ZeroMQ sends it to each) until x~ changes; it goes at
    // the change (a range applied, a round closed, a resume), so no stale copy is kept for the run.
    const Payload& welcome_copy();
    std::size_t size() const { return state_.x.size(); }
    // A worker is welcomed with x~ as it is now: the rule's per-worker state starts, and both of
    // its directions start from that x~ (its x_i).
    void join(CenterWorker& w);
    // The rule's per-worker state ends (the worker's directions go with its record).
    void leave(std::uint32_t worker_id) { rule_->on_leave(worker_id); }
    // Goes on from a checkpoint's x~ and version.
    void resume(std::vector<float> x, std::uint64_t version);

    // Counts a complete exchange pulled at `pull_version` (never past version()); returns how many
    // updates x~ took since that pull (its staleness).
    std::uint64_t receive(std::uint64_t pull_version);
    // Asynchronous rules: applies `exchange` (whole, or one range of it when streaming) to x~
    // and writes the worker's reply for it into `reply` (it may be the exchange's own payload);
    // returns the update's norm. x~'s version moves with the exchange's last range.
    double apply(const Exchange& exchange, float* reply);
    // Synchronous rules: adds `exchange` (or one range of it) to the open round. One pulled
    // before the current version missed a round, and is folded into this one (a late report).
    void contribute(const Exchange& exchange);
    struct Closed {
        Payload reply;  // x~'s size: the one reply of every contributor
        double norm;
    };
    Closed close_round();

private:
    std::unique_ptr<CenterRule> rule_;
    CenterState state_;
    UpdateOptions options_;
    CenterStats& stats_;
    RecycledPayloads round_replies_;  // a round's one reply
    bool streams_ = false;  // exchanges reach the rule range by range (UpdateOptions::stream_exchanges)
    Payload welcome_;  // welcome_copy(); empty once x~ changed
};

}  // namespace tether
