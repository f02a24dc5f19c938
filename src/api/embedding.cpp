// The embedding API (include/tether/tether.hpp) on top of the same Center, WorkerNode,
// strategies and transport that `tether run` uses.
#include <tether/tether.hpp>

#include <unistd.h>

#include <atomic>
#include <thread>

#include "strategy/configured_strategy.hpp"
#include "backend/backend.hpp"
#include "center/center.hpp"
#include "config/json_reader.hpp"
#include "protocol/header.hpp"
#include "strategy/registry.hpp"
#include "transport/peer_identity.hpp"
#include "util/errors.hpp"
#include "worker/worker_node.hpp"

namespace tether {
namespace {

std::string distributed_names() {
    std::string names;
    for (const auto& name : strategy_names())
        if (name != "sequential") names += (names.empty() ? "" : ", ") + name;
    return names;
}

// The strategy of ServiceOptions.strategy, built by the registry the config parser uses: the
// same names (a registered strategy too), keys, defaults and errors, named
// "ServiceOptions.strategy.KEY". Rules that tie a strategy to a training section (eamsgd wants
// Nesterov) are the embedding user's own: their optimizer is theirs.
std::shared_ptr<const ConfiguredStrategy> build_strategy(const ServiceOptions& o, std::size_t count) {
    const std::string where = "ServiceOptions.strategy";
    nlohmann::json block;
    try {
        block = nlohmann::json::parse(o.strategy);
    } catch (const nlohmann::json::parse_error& e) {
        throw ConfigError(where + ": not valid JSON: " + std::string(e.what()));
    }
    if (!block.is_object())
        throw ConfigError(where + ": expected a JSON object such as {\"name\": \"aeasgd\"}, got " + block.dump());
    if (!block.contains("name"))
        throw ConfigError(where + ": no \"name\"; name a strategy, e.g. {\"name\": \"aeasgd\"}");
    if (o.workers < 1)
        throw ConfigError("ServiceOptions.workers: " + std::to_string(o.workers) + "; at least 1 worker is needed");
    if (o.worker_timeout_ms < 200)
        throw ConfigError("ServiceOptions.worker_timeout_ms: " + std::to_string(o.worker_timeout_ms) +
                          " ms is too short for the workers' heartbeats; use at least 200");
    nlohmann::json resolved;
    JsonReader reader(&block, where, resolved);
    auto strategy = make_strategy(reader, StrategyContext{o.workers, count});
    reader.finish();
    if (!strategy->uses_center())
        throw ConfigError(where + ".name: \"" + strategy->name() +
                          "\" has no center; name a distributed strategy (one of " + distributed_names() + ")");
    return strategy;
}

// Both sides hash the strategy's resolved options with the parameter count: a worker started
// with another strategy, window or moving rate than its center is refused at its hello.
std::uint64_t api_fingerprint(std::size_t count, const ConfiguredStrategy& s) {
    return fingerprint(count, {}, s.describe().dump());
}

class Worker final : public WorkerClient {
public:
    Worker(std::shared_ptr<Transport> transport, const std::string& address, const ServiceOptions& o, float* x,
           std::size_t count, Memory memory)
        : transport_(std::move(transport)), strategy_(build_strategy(o, count)),
          backend_(make_backend({memory == Memory::cuda ? "cuda" : "cpu", 1, /*cuda_device=*/-1})) {
        WorkerOptions options;
        options.fingerprint = api_fingerprint(count, *strategy_);
        options.join_timeout_ms = o.join_timeout_ms;
        options.reply_timeout_ms = o.reply_timeout_ms;
        options.communication_window = strategy_->communication_window();
        options.heartbeat_ms = std::min(1000, o.worker_timeout_ms / 4);  // well inside the center's timeout
        options.center_address = address;
        node_ = std::make_unique<WorkerNode>(
            transport_->connect(address, unique_peer_identity("api-worker"), TransportOptions{}),
            options, count);
        const Welcome welcome = node_->join();
        id_ = welcome.worker_id;
        node_->start(*backend_, x, strategy_->make_worker_rule({o.workers, count}), welcome);
    }
    bool step(std::size_t samples) override { return node_->after_step(samples); }
    WorkerReport finish() override {
        const WorkerResult r = node_->finish();
        return {r.worker_id, r.steps, r.samples, r.exchanges, r.bytes_sent, r.bytes_received, r.seconds_waiting};
    }
    unsigned id() const override { return id_; }

private:
    std::shared_ptr<Transport> transport_;
    std::shared_ptr<const ConfiguredStrategy> strategy_;
    std::unique_ptr<Backend> backend_;  // before node_: the rule's buffers live in its memory
    std::unique_ptr<WorkerNode> node_;
    unsigned id_ = 0;
};

class Service final : public CenterService {
public:
    Service(std::vector<float> initial, const ServiceOptions& o)
        : options_(o), strategy_(build_strategy(o, initial.size())), transport_(make_zmq_transport()),
          count_(initial.size()) {
        static std::atomic<unsigned> counter{0};
        const std::string address = o.address.empty() ? "inproc://tether-api-" + std::to_string(counter++) : o.address;
        CenterOptions c;
        c.expected_workers = o.workers;
        c.fingerprint = api_fingerprint(count_, *strategy_);
        c.quorum = o.quorum;
        c.round_timeout_ms = o.round_timeout_ms;
        c.worker_timeout_ms = o.worker_timeout_ms;
        c.join_timeout_ms = o.join_timeout_ms;
        center_ = std::make_unique<Center>(transport_->bind(address, TransportOptions{}),
                                           strategy_->make_center_rule({o.workers, count_}),
                                           std::move(initial), c);
        thread_ = std::thread([this] {
            set_flush_denormals(options_.flush_denormals);  // the center's own thread, not the caller's
            try {
                center_->serve();
            } catch (...) {
                failure_ = std::current_exception();
            }
        });
    }
    ~Service() override {
        if (thread_.joinable()) {
            center_->stop();
            thread_.join();
        }
    }
    std::string address() const override { return center_->address(); }
    std::unique_ptr<WorkerClient> connect_worker(float* x, std::size_t count, Memory memory) override {
        return std::make_unique<Worker>(transport_, address(), options_, x, count, memory);
    }
    std::vector<float> wait() override {
        if (thread_.joinable()) thread_.join();
        if (failure_) std::rethrow_exception(failure_);
        return center_->state().x;
    }
    std::string stats_json() const override { return center_->stats().to_json().dump(); }

private:
    ServiceOptions options_;
    std::shared_ptr<const ConfiguredStrategy> strategy_;
    std::shared_ptr<Transport> transport_;
    std::size_t count_;
    std::unique_ptr<Center> center_;
    std::thread thread_;
    std::exception_ptr failure_;
};

}  // namespace

std::unique_ptr<WorkerClient> WorkerClient::connect(const std::string& address, const ServiceOptions& options,
                                                    float* parameters, std::size_t count, Memory memory) {
    return std::make_unique<Worker>(make_zmq_transport(), address, options, parameters, count, memory);
}

std::unique_ptr<CenterService> CenterService::start(std::vector<float> initial, const ServiceOptions& options) {
    return std::make_unique<Service>(std::move(initial), options);
}

}  // namespace tether
