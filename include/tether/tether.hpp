// tether's embedding API: elastic-averaging and accumulated-update strategies for a training
// loop you own. You keep the model, the data and the gradients; tether keeps the exchange with
// the center. A worker hands tether one flat float32 parameter buffer (host or CUDA device
// memory) and calls step() after each local optimizer step; the strategy decides when
// (every communication_window steps) and what to exchange. See docs/embedding.md.
//
//   auto center = tether::CenterService::start(initial, {R"({"name": "aeasgd"})", 3});
//   // on each of 3 threads:
//   auto worker = center->connect_worker(params.data(), params.size());
//   for (...) { my_sgd_step(params); worker->step(batch_size); }
//   worker->finish();
//   // then:
//   std::vector<float> trained = center->wait();
//
// Errors are exceptions derived from std::runtime_error whose message names what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tether/version.hpp>  // TETHER_VERSION_MAJOR, _MINOR, _PATCH, _STRING

namespace tether {

enum class Memory { host, cuda };

struct ServiceOptions {
    // The strategy block, exactly as under "strategy" in a config file (docs/config.md).
    std::string strategy = R"({"name": "aeasgd"})";
    int workers = 1;
    // Where the center listens. "" = a private inproc:// address (workers in this process, via
    // connect_worker); "tcp://127.0.0.1:*" or "tcp://*:5555" for workers in other processes.
    std::string address;
    int join_timeout_ms = 60000;     // center: for all workers to join; worker: for its welcome
    int worker_timeout_ms = 20000;   // silence after which the center counts a worker lost
    int reply_timeout_ms = 600000;   // worker: for a reply (synchronous rounds can be long)
    int round_timeout_ms = 30000;    // synchronous strategies: round deadline (with quorum)
    double quorum = 0.5;
    // Flush denormal floats to zero on the center's thread (tether's own). The callers'
    // threads, where step() runs, are never changed; see set_flush_denormals() below.
    bool flush_denormals = true;
};

// Sets (or clears) flush-to-zero and denormals-are-zero on the calling thread: what a user may
// do on their own training threads. Subnormal floats (below 1.2e-38) carry no signal in
// float32 training, and arithmetic on them is ~100x slower on x86 cores; Adam's second moments
// and small gradients drift into that range as training goes on. tether does this on every
// thread it owns and never on yours. (PyTorch: torch.set_flush_denormal(True).)
void set_flush_denormals(bool on = true);

struct WorkerReport {
    unsigned worker_id = 0;
    std::size_t steps = 0, samples = 0, exchanges = 0;
    std::uint64_t bytes_sent = 0, bytes_received = 0;
    double seconds_waiting = 0;
};

class WorkerClient {
public:
    // Joins the center at `address` from any process. Blocks until the center has welcomed it
    // (the center waits for all `options.workers` workers), then sets the buffer to x~.
    // `parameters` must stay valid and in `memory` until finish().
    static std::unique_ptr<WorkerClient> connect(const std::string& address, const ServiceOptions& options,
                                                 float* parameters, std::size_t count, Memory memory = Memory::host);
    virtual ~WorkerClient() = default;

    // After each local optimizer step; `samples` is that step's minibatch size (for progress
    // and staleness bookkeeping). Returns true when this call exchanged with the center.
    virtual bool step(std::size_t samples = 0) = 0;
    // Final exchange (nothing trained is lost) and goodbye. Call once, at the end.
    virtual WorkerReport finish() = 0;
    virtual unsigned id() const = 0;
};

class CenterService {
public:
    // Starts the center on its own thread with x~(0) = initial. Workers must start from the
    // same point (the center sends it to them on join).
    static std::unique_ptr<CenterService> start(std::vector<float> initial, const ServiceOptions& options);
    virtual ~CenterService() = default;

    virtual std::string address() const = 0;
    // A worker in this process (works with the private inproc:// address too).
    virtual std::unique_ptr<WorkerClient> connect_worker(float* parameters, std::size_t count,
                                                         Memory memory = Memory::host) = 0;
    // Blocks until every worker finished (or was lost); returns the final x~.
    virtual std::vector<float> wait() = 0;
    // The center's statistics as JSON (updates, staleness, bytes, rejected messages, losses).
    virtual std::string stats_json() const = 0;
};

}  // namespace tether
