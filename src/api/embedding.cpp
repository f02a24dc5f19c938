// The embedding API (include/tether/tether.hpp) on top of the same Center, WorkerNode,
// strategies and transport that `tether run` uses.
#include <tether/tether.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "api/service_settings.hpp"
#include "backend/backend.hpp"
#include "backend/float_mode.hpp"
#include "center/server_group.hpp"
#include "protocol/framing.hpp"
#include "run/agreed_settings.hpp"
#include "run/center_run.hpp"
#include "transport/peer_identity.hpp"
#include "util/errors.hpp"
#include "worker/parameter_layout.hpp"
#include "worker/worker_node.hpp"

namespace tether {
namespace {

std::vector<ParameterSegment> segments_of(const std::vector<ParameterSpan>& parameters) {
    std::vector<ParameterSegment> segments;
    for (const auto& p : parameters) segments.push_back({p.data, p.count});
    return segments;
}

class Worker final : public WorkerClient {
public:
    Worker(std::shared_ptr<Transport> transport, const std::string& address, const ServiceOptions& o,
           std::vector<ParameterSegment> parameters, Memory memory, std::vector<ParameterSegment> buffers = {})
        : transport_(std::move(transport)) {
        // Checked before joining: a refused buffer must not take one of the center's places.
        const std::size_t count = check_parameter_segments(parameters);
        const std::size_t buffer_count = check_buffer_segments(parameters, buffers);
        const ServiceSettings settings = service_settings(o, count, buffer_count);
        strategy_ = settings.strategy;
        const std::vector<std::string> addresses = split_addresses(address, "WorkerClient::connect address");
        if (addresses.size() != settings.servers.size())
            throw ConfigError("WorkerClient::connect: " + std::to_string(addresses.size()) + " address(es) in \"" + address +
                              "\", but ServiceOptions.servers is " + std::to_string(settings.servers.size()));
        backend_ = make_backend({memory == Memory::cuda ? "cuda" : "cpu", 1, /*cuda_device=*/-1});
        WorkerOptions options;
        options.join_timeout_ms = o.join_timeout_ms;
        options.reply_timeout_ms = o.reply_timeout_ms;
        options.communication_window = strategy_->communication_window();
        options.heartbeat_ms = std::min(1000, o.worker_timeout_ms / 4);  // well inside the center's timeout
        options.center_timeout_ms = o.worker_timeout_ms;
        options.overlap = o.overlap_exchange;
        options.payload_codec = settings.payload_codec;
        options.reply_codec = settings.reply_codec;
        options.wire_kinds = strategy_->wire_kinds();
        options.buffer_count = buffer_count;
        const std::string identity = unique_peer_identity("api-worker");
        std::vector<ServerLink> links;
        for (std::size_t k = 0; k < addresses.size(); ++k)
            links.push_back({transport_->connect(addresses[k], identity, TransportOptions{}), settings.servers[k].fingerprint,
                             settings.servers[k].agreed.dump(), addresses[k]});
        node_ = std::make_unique<WorkerNode>(std::move(links), options, count);
        const Welcome welcome = node_->join();
        id_ = welcome.worker_id;
        node_->start(*backend_, std::move(parameters), strategy_->make_worker_rule({o.workers, count}), welcome,
                     std::move(buffers));
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

// The servers' bind addresses: ServiceOptions.address (one per server, separated by ','), or
// a private inproc:// address each.
std::vector<std::string> bind_addresses(const ServiceOptions& o) {
    static std::atomic<unsigned> counter{0};
    std::vector<std::string> out;
    if (!o.address.empty()) {
        out = split_addresses(o.address, "ServiceOptions.address");
        if (out.size() != std::size_t(std::max(o.servers, 1)))
            throw ConfigError("ServiceOptions.address: " + std::to_string(out.size()) + " address(es) for " +
                              std::to_string(o.servers) + " servers (ServiceOptions.servers); give one per server");
        return out;
    }
    for (int k = 0; k < std::max(o.servers, 1); ++k) out.push_back("inproc://tether-api-" + std::to_string(counter++));
    return out;
}

class Service final : public CenterService {
public:
    Service(std::vector<float> initial, const ServiceOptions& o, std::vector<float> initial_buffers)
        : options_(o), settings_(service_settings(o, initial.size(), initial_buffers.size())),
          transport_(make_zmq_transport()), count_(initial.size()) {
        const std::vector<std::string> addresses = bind_addresses(o);
        CenterOptions c;
        c.expected_workers = o.workers;
        c.quorum = o.quorum;
        c.round_timeout_ms = o.round_timeout_ms;
        c.worker_timeout_ms = o.worker_timeout_ms;
        c.join_timeout_ms = o.join_timeout_ms;
        c.payload_codec = settings_.payload_codec;
        c.reply_codec = settings_.reply_codec;
        c.wire_kinds = settings_.strategy->wire_kinds();
        c.max_message_bytes = std::max(c.max_message_bytes, max_payload_bytes(c.payload_codec, c.chunk_elements) + 8192);
        // The servers never block on a send to a peer that stopped reading (as in center_run):
        // they hold the state lock that snapshot() and stats_json() wait for.
        TransportOptions bind_options;
        bind_options.send_timeout_ms = 0;
        std::vector<GroupMember> members;
        for (std::size_t k = 0; k < settings_.servers.size(); ++k) {
            const ServerIdentity& server = settings_.servers[k];
            CenterOptions mine = c;
            mine.fingerprint = server.fingerprint;
            mine.explain_mismatch = mismatch_explainer(server.agreed);
            mine.ids_from_hello = k > 0;
            if (settings_.servers.size() > 1) mine.name = "server " + std::to_string(k) + "/" + std::to_string(o.servers);
            std::vector<float> range(initial.begin() + std::ptrdiff_t(server.range.first),
                                     initial.begin() + std::ptrdiff_t(server.range.first + server.range.count));
            members.push_back({std::make_unique<Center>(transport_->bind(addresses[k], bind_options),
                                                        settings_.strategy->make_center_rule({o.workers, server.range.count}),
                                                        std::move(range), mine),
                               k, server.range});
        }
        // The model buffers live on server 0 alone (b~ is small; its workers send it theirs).
        if (!initial_buffers.empty()) members.front().center->hold_buffers(std::move(initial_buffers));
        group_ = std::make_unique<ServerGroup>(std::move(members));
        thread_ = std::thread([this] {
            set_flush_denormals(options_.flush_denormals);  // the servers' own threads, not the caller's
            try {
                const bool flush = options_.flush_denormals;
                group_->serve([flush] { set_flush_denormals(flush); });
            } catch (...) {
                failure_ = std::current_exception();
            }
        });
    }
    ~Service() override {
        std::lock_guard<std::mutex> lock(wait_mutex_);
        if (thread_.joinable()) {
            group_->stop();
            thread_.join();
        }
    }
    std::string address() const override {
        std::string joined;
        for (const auto& a : group_->addresses()) joined += (joined.empty() ? "" : ",") + a;
        return joined;
    }
    std::unique_ptr<WorkerClient> connect_worker(std::vector<ParameterSpan> parameters, Memory memory,
                                                 std::vector<ParameterSpan> buffers) override {
        return std::make_unique<Worker>(transport_, address(), options_, segments_of(parameters), memory,
                                        segments_of(buffers));
    }
    CenterSnapshot snapshot() const override {
        // Each range between two of its server's updates (center/server_group.hpp); the version is server 0's.
        CenterSnapshot s;
        s.x.resize(count_);
        s.version = group_->copy_ranges(s.x.data(), ~std::size_t(0), &s.buffers).front();
        return s;
    }
    std::vector<float> wait() override {
        std::lock_guard<std::mutex> lock(wait_mutex_);  // one joins, the others find it joined
        if (thread_.joinable()) thread_.join();
        if (failure_) std::rethrow_exception(failure_);
        return snapshot().x;
    }
    std::string stats_json() const override { return group_->stats_now().to_json().dump(); }

private:
    ServiceOptions options_;
    ServiceSettings settings_;
    std::shared_ptr<Transport> transport_;
    std::size_t count_;
    std::unique_ptr<ServerGroup> group_;
    std::mutex wait_mutex_;
    std::thread thread_;
    std::exception_ptr failure_;  // written by the servers' thread before it ends; read after join
};

}  // namespace

std::unique_ptr<WorkerClient> WorkerClient::connect(const std::string& address, const ServiceOptions& options,
                                                    std::vector<ParameterSpan> parameters, Memory memory) {
    return std::make_unique<Worker>(make_zmq_transport(), address, options, segments_of(parameters), memory);
}

std::unique_ptr<WorkerClient> WorkerClient::connect(const std::string& address, const ServiceOptions& options,
                                                    std::vector<ParameterSpan> parameters, Memory memory,
                                                    std::vector<ParameterSpan> buffers) {
    return std::make_unique<Worker>(make_zmq_transport(), address, options, segments_of(parameters), memory,
                                    segments_of(buffers));
}

std::unique_ptr<CenterService> CenterService::start(std::vector<float> initial, const ServiceOptions& options) {
    return std::make_unique<Service>(std::move(initial), options, std::vector<float>{});
}

std::unique_ptr<CenterService> CenterService::start(std::vector<float> initial, const ServiceOptions& options,
                                                    std::vector<float> initial_buffers) {
    return std::make_unique<Service>(std::move(initial), options, std::move(initial_buffers));
}

}  // namespace tether
