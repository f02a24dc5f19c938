// A worker: joins the center, and every communication window runs the strategy's exchange on
// the worker's parameters. The one protocol client of tether: the CLI's training loop
// (train()) and the embedding API (after_step() from the user's loop) both drive it.
//
// One exchange path, asked after every local step: the strategy's ExchangePolicy says which part
// of x goes out (all of it through the rule, or one server's range copied by the worker) and
// when its reply lands (at once, or after d more local steps, kept or mixed).
//
// Threads: the training thread calls everything here; the worker's SessionThread sends
// heartbeats between steps and, when replies land late, runs each exchange while the training
// thread goes on. The parameters, the rule and the policy are only ever touched on the training
// thread.
#pragma once

#include <tether/strategy.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "data/sample_stream.hpp"
#include "train/local_trainer.hpp"
#include "transport/transport.hpp"
#include "worker/server_sessions.hpp"
#include "worker/parameter_layout.hpp"
#include "worker/session_thread.hpp"

namespace tether {

// The session's options (server_session.hpp) and the training loop's. heartbeat_ms: a
// heartbeat when nothing was sent for this long, from the training thread after a step and
// from the worker's own thread while the training loop is away; 0: one after every step that
// does not exchange, and none from the worker's thread (for tests).
struct WorkerOptions : SessionOptions {
    std::size_t epochs = 1;  // passes over this worker's shard, without a budget
    // cluster.budget_samples > 0: train() goes on over its shard until a reply says the run's
    // budget is trained (WorkerNode::budget_met), however many epochs that takes.
    bool budget = false;
    std::vector<std::int64_t> step_delay_ms;  // by worker id: a simulated straggler's extra time per step
    int communication_window = 1;
    // The strategy's exchange policy (<tether/exchange_policy.hpp>), made once per worker; unset:
    // all of x every communication_window steps, the worker waiting for each reply.
    std::function<std::unique_ptr<ExchangePolicy>()> exchange_policy;
};

struct WorkerResult {
    std::uint32_t worker_id = 0;
    std::size_t steps = 0, samples = 0, exchanges = 0;
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    double seconds_waiting = 0;  // the training thread blocked on the center
    std::size_t rejoins = 0;     // times the center had forgotten this worker (restarted) and it joined again
    // Dynamic local updates: how often the center changed this worker's window, and the last,
    // smallest and largest it gave (0: the center never sized it).
    std::size_t window_changes = 0;
    int last_window = 0, smallest_window = 0, largest_window = 0;
};

class WorkerNode {
public:
    // One server per link (cluster.servers), in order; options.fingerprint, agreed_settings and
    // server_address are taken from the links.
    WorkerNode(std::vector<ServerLink> servers, WorkerOptions options, std::size_t num_parameters);
    // One server, as the options describe it.
    WorkerNode(std::unique_ptr<Channel> channel, WorkerOptions options, std::size_t num_parameters);
    ~WorkerNode();
    // Says hello and waits for the welcome (its worker id picks the worker's shard).
    Welcome join();
    // Before join(): the place (worker id) to ask for, e.g. a launcher rank's, so that a restarted
    // rank takes its own place (and shard) back, with what that place trained (Welcome::trained).
    void ask_for_place(std::uint32_t id) { session_.ask_for(id); }
    // What server k's session last pulled (kept with ServerLink::keep_pulled).
    PulledRange pulled(std::size_t k) { return session_.pulled(k); }
    std::size_t servers() const { return session_.servers(); }
    // Counts this worker's samples on from `samples` (the place's record in its welcome), as
    // the center counts them: a process that took its place back claims only what it trains.
    void count_from(std::uint64_t samples) {
        result_.samples = std::size_t(samples);
        publish_progress();
    }
    // Binds the worker's parameters (backend memory: one buffer, or several that the rule sees
    // as one vector, in order) and its rule, and sets the parameters to x~. `buffers`: the model
    // buffers the center averages (options.buffer_count elements in all, backend memory, never
    // seen by the rule), set to b~ here and on every join again, read before every exchange.
    void start(Backend& backend, std::vector<ParameterSegment> parameters, std::unique_ptr<WorkerRule> rule,
               const Welcome& welcome, std::vector<ParameterSegment> buffers = {});
    void start(Backend& backend, float* x, std::unique_ptr<WorkerRule> rule, const Welcome& welcome) {
        start(backend, {{x, num_parameters_}}, std::move(rule), welcome);
    }
    // Call after each local step that processed `samples` samples: lands a reply that is due and
    // sends what the policy says is due. Returns true when an exchange went out or a reply landed
    // in x (x may have changed).
    bool after_step(std::size_t samples);
    // Exchanges every part of x changed since it last went out (nothing trained is lost), all at
    // once, then says bye.
    WorkerResult finish();
    // The worker's own scalars (loss, accuracy, ...) to server 0, for the run directory
    // (protocol/worker_log.hpp); throws std::invalid_argument for a bad name or too many.
    void log(const std::vector<std::pair<std::string, double>>& scalars);
    // A reply said the run's budget (cluster.budget_samples) is trained: stop training.
    bool budget_met() const { return budget_met_; }
    // cluster.leases: asks server 0 now for the next block of at most `want` positions (`total`:
    // the positions the worker's data give, 0: none named); next_lease() takes the answer. Ask
    // a step before the block is needed and the answer travels during that step.
    void ask_lease(std::uint64_t want, std::uint64_t total);
    // The next block (asked now if it was not): count 0 when no work is left.
    Lease next_lease(std::uint64_t want, std::uint64_t total);
    // start + one pass of after_step per local step for options.epochs epochs (with a budget:
    // until budget_met(); with leases: over the leases `stream` maps to rows, until none is
    // left or the budget is met) + finish.
    // Throws on a center error, a timeout or a delivery failure.
    WorkerResult train(LocalTrainer& trainer, std::unique_ptr<WorkerRule> rule, const Welcome& welcome,
                       SampleStream* stream = nullptr);

private:
    void start_session_thread();
    std::optional<Payload> make_buffers();        // the buffers, to host memory; none without buffers
    void take_buffers(const std::vector<float>& b);  // the buffers <- b~ (a welcome's)
    void take_welcome(const Welcome& welcome);  // x <- x~ (joining, or joining again)
    // After the rule applied a reply of which some servers' ranges are welcomes (they had
    // forgotten this worker): x <- x~ there, and the rule starts again from x.
    void take_partial_welcome(const ExchangeOutcome& outcome);
    bool rejoined_everywhere(const ExchangeOutcome& outcome) const;
    // The policy's parts: none (all of x, through the rule) or its fragments, server f's range each.
    bool whole() const { return fragments_ == 0; }
    // x is a buffer of its own: a late reply's exchange keeps its snapshot there, a mixed reply
    // lands there before it is mixed into the buffers.
    bool staged() const { return landing_.late() || landing_.mixing.has_value(); }
    void check_finite(const float* x, std::size_t count, const std::string& where) const;
    // The payload of an exchange of `parts` (x gathered first where it is staged).
    Payload& make_payload(const std::vector<std::size_t>& parts);
    void exchange(const std::vector<std::size_t>& parts);  // blocking: out, wait, land
    void post(std::size_t part);                            // late: out on the worker's thread
    void complete();                                        // late: wait for it and land it
    // The reply into x: over the snapshot x(t) with the steps since kept (`late`), or mixed.
    void land(const std::vector<std::size_t>& parts, const ExchangeOutcome& outcome, bool late);
    void land_whole(const ExchangeOutcome& outcome, bool late);
    void land_fragment(std::size_t f, const ExchangeOutcome& outcome);
    WorkerProgress progress() const;
    void publish_progress() { session_.set_progress(progress()); }

    WorkerOptions options_;
    std::size_t num_parameters_;
    ServerSessions session_;
    Backend* backend_ = nullptr;
    std::optional<ParameterLayout> layout_;
    std::unique_ptr<WorkerRule> rule_;
    std::vector<ParameterSegment> buffers_;
    std::unique_ptr<ExchangePolicy> policy_;
    std::size_t fragments_ = 0;
    Landing landing_;
    std::vector<bool> changed_;  // by part: a local step since it last went out
    struct InFlight {
        std::size_t part = 0, lands_after = 0;  // lands after that local step
    };
    std::optional<InFlight> in_flight_;
    WorkerResult result_;
    bool budget_met_ = false;
    RecycledPayloads payloads_;  // the exchanges' messages
    RecycledPayloads buffer_payloads_;
    std::unique_ptr<SessionThread> thread_;  // last: stopped first
};

}  // namespace tether
