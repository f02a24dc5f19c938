// A worker: joins the center (hello/welcome), trains its shard with its local optimizer and,
// every communication window, runs the strategy's exchange with the center.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <tether/strategy.hpp>
#include "protocol/header.hpp"
#include "train/local_trainer.hpp"
#include "transport/transport.hpp"

namespace tether {

struct WorkerOptions {
    std::uint64_t fingerprint = 0;
    std::size_t shard_elements = 1 << 20;
    int join_timeout_ms = 60000;
    int reply_timeout_ms = 600000;
    int heartbeat_ms = 2000;
    // While waiting, the worker sends heartbeats and the center answers them: once the center
    // has answered once, this much silence means it is gone (cluster.worker_timeout_ms).
    int center_timeout_ms = 10000;
    // The worker's agreed settings (run/agreed_settings.hpp), sent in the hello so that the
    // center can name a setting that differs.
    std::string agreed_settings;
    std::size_t epochs = 1;  // passes over this worker's shard
    std::vector<std::int64_t> step_delay_ms;  // by worker id: a simulated straggler's extra time per step
    int communication_window = 1;
    std::string center_address;  // for messages only
};

struct WorkerResult {
    std::uint32_t worker_id = 0;
    std::size_t steps = 0, samples = 0, exchanges = 0;
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    double seconds_waiting = 0;  // blocked on the center (send + reply)
    std::size_t rejoins = 0;     // times the center had forgotten this worker (restarted) and it joined again
};

// What the center told a worker on joining.
struct Welcome {
    std::uint32_t worker_id = 0;
    std::uint64_t version = 0;
    std::vector<float> center;  // x~ at join time
};

class WorkerNode {
public:
    WorkerNode(std::unique_ptr<Channel> channel, WorkerOptions options, std::size_t num_parameters);
    // A worker that did not finish (an error, a dead center) drops what it still had queued
    // instead of lingering on it: a failing worker exits at once.
    ~WorkerNode();
    // Says hello and waits for the welcome (its worker id picks the worker's shard).
    Welcome join();
    // Binds the worker's parameters x (backend memory) and its rule, and sets x <- x~.
    void start(Backend& backend, float* x, std::unique_ptr<WorkerRule> rule, const Welcome& welcome);
    // Call after each local step that processed `samples` samples: runs the strategy's exchange
    // when the communication window is full. Returns true when it exchanged.
    bool after_step(std::size_t samples);
    // Exchanges what the steps since the last exchange did (nothing is lost), then says bye.
    WorkerResult finish();
    // start + one pass of after_step per local step for options.epochs epochs + finish.
    // Throws on a center error, a timeout or a delivery failure.
    WorkerResult train(LocalTrainer& trainer, std::unique_ptr<WorkerRule> rule, const Welcome& welcome);

private:
    void exchange();
    void rejoin();
    void heartbeat();
    void send(const Header& header, const void* payload, std::size_t bytes);
    void send(const Header& header, const Payload& payload);  // without copying
    Header base_header(MessageType type) const;
    // Receives a full vector (all shards) of `type` into `out`: the received frame itself when
    // it came as one shard, else reassembled; returns the last header.
    Header receive_vector(MessageType type, Payload& out, int timeout_ms, std::uint64_t sequence);

    Backend* backend_ = nullptr;
    float* x_ = nullptr;
    std::unique_ptr<WorkerRule> rule_;
    std::size_t steps_since_exchange_ = 0;
    std::unique_ptr<Channel> channel_;
    WorkerOptions options_;
    WorkerResult result_;
    std::uint64_t sequence_ = 0;
    std::size_t num_parameters_;
    // The exchange sent last; refilled only once ZeroMQ (or, over inproc://, the center that
    // answers in it) has let go of it.
    Payload payload_;
    std::chrono::steady_clock::time_point last_send_;
    bool finished_ = false, rejoining_ = false;
    bool heard_from_center_ = false;  // until then the join timeout bounds waits (startup races)
    std::chrono::steady_clock::time_point last_heard_;
};

}  // namespace tether
