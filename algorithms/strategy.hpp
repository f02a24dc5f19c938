// The Strategy seam. A Strategy is immutable, built once from the config's `strategy` block;
// it makes one WorkerRule per worker (per-run state such as x_pull) and one CenterRule for
// the center. The center owns x~ (host memory); a worker's x_i lives in its backend's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace tether {

struct CenterState {
    std::vector<float> x;       // the central variable x~
    std::uint64_t version = 0;  // updates applied so far
};

// One worker's complete exchange, reassembled from its shards.
struct Exchange {
    std::uint32_t worker_id = 0;
    std::uint64_t pull_version = 0;  // center version at the worker's last pull
    const float* payload = nullptr;
    std::size_t size = 0;
};

class WorkerRule {
public:
    virtual ~WorkerRule() = default;
    // Called once with the center's x~ (host) when the worker joins; x (backend) is the
    // worker's parameters, which every rule starts equal to x~.
    virtual void on_join(Backend& backend, float* x, const float* center_host, std::uint64_t version);
    // Writes what this worker sends to the center into `payload_host` (num_parameters floats).
    virtual void make_payload(Backend& backend, const float* x, float* payload_host) = 0;
    // Applies the center's reply (host, num_parameters floats) to x.
    virtual void apply_reply(Backend& backend, float* x, const float* reply_host, std::uint64_t version) = 0;
    // The center version this worker last pulled (sent with each exchange, for staleness).
    std::uint64_t pull_version() const { return pull_version_; }

protected:
    std::uint64_t pull_version_ = 0;
};

class CenterRule {
public:
    virtual ~CenterRule() = default;
    // Synchronous rules collect a round (contribute) and answer everyone when it closes;
    // asynchronous rules answer each exchange at once (apply).
    virtual bool synchronous() const { return false; }

    // A worker was welcomed with the current x~ (its first pull), or left (finished or lost).
    // For rules that keep per-worker state; they must free it on leave.
    virtual void on_join(const CenterState& center, std::uint32_t worker_id) { (void)center, (void)worker_id; }
    virtual void on_leave(std::uint32_t worker_id) { (void)worker_id; }

    // Asynchronous: apply one exchange to the center and write the reply (center.x.size()
    // floats). Returns the norm of the update the center applied to x~. `reply` may be the
    // exchange's own payload (the center answers in the buffer it received, without a copy):
    // read payload[i] before writing reply[i], element by element. The payload has been
    // checked already: right size, every element finite.
    virtual double apply(CenterState& center, const Exchange& exchange, float* reply);

    // Synchronous: add one worker's exchange to the open round.
    virtual void contribute(CenterState& center, const Exchange& exchange);
    // Synchronous: close the round (contributors > 0), update x~, and write the one reply every
    // contributor receives (center.x.size() floats). Returns the norm of the update to x~.
    virtual double close_round(CenterState& center, float* reply);
};

struct StrategyContext {
    int workers = 1;
    std::size_t num_parameters = 0;
};

class Strategy {
public:
    virtual ~Strategy() = default;
    virtual std::string name() const = 0;
    // Local steps between two exchanges (tau).
    virtual int communication_window() const = 0;
    // False for the sequential reference, which trains without a center.
    virtual bool uses_center() const { return true; }
    // The rule's hyperparameters as resolved (for summaries and logs).
    virtual nlohmann::json describe() const = 0;
    virtual std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const = 0;
    virtual std::unique_ptr<CenterRule> make_center_rule(const StrategyContext& context) const = 0;
};

// Reads the keys every strategy shares; a strategy's parser calls this first.
struct CommonStrategyOptions {
    int communication_window = 1;
};
CommonStrategyOptions read_common_options(JsonReader& reader, int default_window);
// The moving rate alpha: given, or beta / N with beta = 0.9 (the EASGD paper's default).
double read_moving_rate(JsonReader& reader, int workers);

}  // namespace tether
