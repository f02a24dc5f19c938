// Who belongs to the run: the peers that said hello, the places (worker ids) they hold, what each
// place has trained, who is silent and lost, whose lost place was taken back, and the warmstart
// that holds all but worker 0 back. Membership decides and counts (CenterStats' worker counters
// and total_samples); it sends nothing: the center welcomes, answers and tells the strategy.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "center/center_options.hpp"
#include "center/center_stats.hpp"
#include "center/center_worker.hpp"
#include "center/leases.hpp"
#include "center/place_records.hpp"
#include "protocol/header.hpp"

namespace tether {

class Membership {
public:
    using Clock = CenterWorker::Clock;
    // How a hello left the run: the joiner waits for the others, joins the run in progress (or
    // comes back to a resumed center), or is the last one the run waited for.
    enum class Joined { waits, joins_run, starts_run };
    // What a loss was: none (the worker had left already), a peer dropped before its welcome,
    // or a welcomed worker lost.
    enum class Loss { none, dropped, lost };
    struct Silence {
        CenterWorker* worker;
        std::string why;
    };

    Membership(const MembershipOptions& options, CenterStats& stats, std::string name);

    CenterWorker* find(const std::string& peer);
    std::size_t peers() const { return by_peer_.size(); }
    // No place is free: every one of the expected workers is live, and the run is not elastic.
    bool full() const;
    // Whether a live peer other than `peer` holds worker id `id`.
    bool id_held(std::uint32_t id, const std::string& peer) const;
    // A hello the center accepted: the peer's record, its place and what that place trained.
    std::pair<CenterWorker*, Joined> join(const std::string& peer, const Header& hello);
    // Workers that joined and wait for their welcome.
    std::vector<CenterWorker*> joining() const;
    // Live workers and peers, as records (a loss while walking them leaves them in place).
    const std::vector<std::unique_ptr<CenterWorker>>& workers() const { return workers_; }
    // The center welcomed `w`: alive from `now`.
    void welcomed(CenterWorker& w, Clock::time_point now);
    // Whether the warmstart holds `w` back (then it is marked held and stays joining).
    bool hold(CenterWorker& w);
    // Whether worker 0 still trains alone: a warmstart not yet reached while worker 0 is live.
    bool warming_up() const;
    // Once the warmstart is over (reached, or worker 0 gone): the workers it held, to welcome.
    // Empty ever after.
    std::vector<CenterWorker*> release_held();

    // Time this center itself did not read (stopped, swapped out, a long checkpoint write) is no
    // silence of its workers: what they sent meanwhile waits unread. Shifts their clocks by it.
    void forgive_own_stall(Clock::time_point now);
    // The first live worker silent past worker_timeout_ms at `now`, and why; with a synchronous
    // round open since `round_opened`, also one that sent no exchange for that long.
    std::optional<Silence> next_silent(Clock::time_point now, std::optional<Clock::time_point> round_opened) const;
    Loss lose(CenterWorker& w, const std::string& why);
    // A bye: what it trained last counts, and it leaves.
    void finish(CenterWorker& w, std::uint64_t samples);
    // Drops the records of departed workers no round refers to.
    void prune();
    // Adds what a worker's accepted message says it trained since its last one, when the claim
    // is one it can have trained (max_samples_per_worker, max_samples_per_window); `exchange`:
    // the claim of a complete exchange, which the next claims are measured from.
    void count_samples(CenterWorker& w, std::uint64_t samples, bool exchange = false);

    // The data's leases (MembershipOptions::leases): a departing worker's rest goes back.
    Leases& leases() { return leases_; }

    bool started() const { return started_; }
    bool resumed() const { return resumed_; }
    // A lost worker that had trained, whose place nobody took back: it may still come back.
    bool awaits_lost() const { return !lost_places_.empty(); }
    // Whether a hello asking for `preferred` would be given a place whose worker finished.
    bool would_give_finished(std::uint32_t preferred) const {
        return stats_.finished_at.count(free_worker_id(preferred)) > 0;
    }
    // Goes on from a checkpoint's place records; each worker is welcomed as it comes back.
    void resume(std::map<std::uint32_t, std::uint64_t> places);
    const std::map<std::uint32_t, std::uint64_t>& places() const { return places_.all(); }

private:
    std::uint32_t free_worker_id(std::uint32_t preferred) const;
    void forget(CenterWorker& w);

    MembershipOptions options_;
    CenterStats& stats_;
    std::string name_;
    std::vector<std::unique_ptr<CenterWorker>> workers_;
    std::map<std::string, CenterWorker*> by_peer_;
    PlaceRecords places_;  // what each worker id has trained, as counted
    Leases leases_;
    std::set<std::uint32_t> lost_places_;  // ids of lost workers no worker has taken back yet
    bool started_ = false, resumed_ = false;
    bool warmstart_over_ = false;  // the held workers were released
    Clock::time_point last_liveness_check_{};
};

}  // namespace tether
