// The embedding API (include/tether/tether.hpp) on top of the same Center, WorkerNode,
// strategies and transport that `tether run` uses.
#include <tether/tether.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "backend/backend.hpp"
#include "center/center.hpp"
#include "config/json_reader.hpp"
#include "protocol/header.hpp"
#include "run/agreed_settings.hpp"
#include "strategy/configured_strategy.hpp"
#include "strategy/registry.hpp"
#include "transport/peer_identity.hpp"
#include "util/errors.hpp"
#include "worker/parameter_layout.hpp"
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

// What a center and its workers must agree on: the strategy with its resolved options, the
// worker count and the parameter count. Both sides hash it into the fingerprint; the hello
// carries it, so a worker that differs is refused naming the setting and both values.
nlohmann::json api_agreed_settings(const ServiceOptions& o, std::size_t count, const ConfiguredStrategy& s) {
    return {{"strategy", s.describe()}, {"workers", o.workers}, {"parameters", count}};
}

std::vector<ParameterSegment> segments_of(const std::vector<ParameterSpan>& parameters) {
    std::vector<ParameterSegment> segments;
    for (const auto& p : parameters) segments.push_back({p.data, p.count});
    return segments;
}

class Worker final : public WorkerClient {
public:
    Worker(std::shared_ptr<Transport> transport, const std::string& address, const ServiceOptions& o,
           std::vector<ParameterSegment> parameters, Memory memory)
        : transport_(std::move(transport)) {
        // Checked before joining: a refused buffer must not take one of the center's places.
        const std::size_t count = check_parameter_segments(parameters);
        strategy_ = build_strategy(o, count);
        backend_ = make_backend({memory == Memory::cuda ? "cuda" : "cpu", 1, /*cuda_device=*/-1});
        const nlohmann::json agreed = api_agreed_settings(o, count, *strategy_);
        WorkerOptions options;
        options.fingerprint = settings_fingerprint(agreed);
        options.agreed_settings = agreed.dump();
        options.join_timeout_ms = o.join_timeout_ms;
        options.reply_timeout_ms = o.reply_timeout_ms;
        options.communication_window = strategy_->communication_window();
        options.heartbeat_ms = std::min(1000, o.worker_timeout_ms / 4);  // well inside the center's timeout
        options.center_timeout_ms = o.worker_timeout_ms;
        options.center_address = address;
        options.overlap = o.overlap_exchange;
        node_ = std::make_unique<WorkerNode>(
            transport_->connect(address, unique_peer_identity("api-worker"), TransportOptions{}), options, count);
        const Welcome welcome = node_->join();
        id_ = welcome.worker_id;
        node_->start(*backend_, std::move(parameters), strategy_->make_worker_rule({o.workers, count}), welcome);
    }
    bool step(std::size_t samples) override { return node_->after_step(samples); }
    WorkerReport finish() override {
        const WorkerResult r = node_->finish();
        return {r.worker_id, r.steps, r.samples, r.exchanges, r.bytes_sent, r.bytes_received, r.seconds_waiting,
                r.rejoins};
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
        const nlohmann::json agreed = api_agreed_settings(o, count_, *strategy_);
        CenterOptions c;
        c.expected_workers = o.workers;
        c.fingerprint = settings_fingerprint(agreed);
        c.explain_mismatch = mismatch_explainer(agreed);
        c.quorum = o.quorum;
        c.round_timeout_ms = o.round_timeout_ms;
        c.worker_timeout_ms = o.worker_timeout_ms;
        c.join_timeout_ms = o.join_timeout_ms;
        // The center never blocks on a send to a peer that stopped reading (as in center_run):
        // it holds the state lock that snapshot() and stats_json() wait for.
        TransportOptions bind_options;
        bind_options.send_timeout_ms = 0;
        center_ = std::make_unique<Center>(transport_->bind(address, bind_options),
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
        std::lock_guard<std::mutex> lock(wait_mutex_);
        if (thread_.joinable()) {
            center_->stop();
            thread_.join();
        }
    }
    std::string address() const override { return center_->address(); }
    std::unique_ptr<WorkerClient> connect_worker(std::vector<ParameterSpan> parameters, Memory memory) override {
        return std::make_unique<Worker>(transport_, address(), options_, segments_of(parameters), memory);
    }
    CenterSnapshot snapshot() const override {
        CenterState state = center_->snapshot_now();
        return {std::move(state.x), state.version};
    }
    std::vector<float> wait() override {
        std::lock_guard<std::mutex> lock(wait_mutex_);  // one joins, the others find it joined
        if (thread_.joinable()) thread_.join();
        if (failure_) std::rethrow_exception(failure_);
        return center_->snapshot_now().x;
    }
    std::string stats_json() const override { return center_->stats_now().to_json().dump(); }

private:
    ServiceOptions options_;
    std::shared_ptr<const ConfiguredStrategy> strategy_;
    std::shared_ptr<Transport> transport_;
    std::size_t count_;
    std::unique_ptr<Center> center_;
    std::mutex wait_mutex_;
    std::thread thread_;
    std::exception_ptr failure_;  // written by the center's thread before it ends; read after join
};

}  // namespace

std::unique_ptr<WorkerClient> WorkerClient::connect(const std::string& address, const ServiceOptions& options,
                                                    std::vector<ParameterSpan> parameters, Memory memory) {
    return std::make_unique<Worker>(make_zmq_transport(), address, options, segments_of(parameters), memory);
}

std::unique_ptr<CenterService> CenterService::start(std::vector<float> initial, const ServiceOptions& options) {
    return std::make_unique<Service>(std::move(initial), options);
}

}  // namespace tether
