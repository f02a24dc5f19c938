// The embedding API (include/tether/tether.hpp) on top of the same Center, WorkerNode,
// strategies and transport that `tether run` uses.
#include <tether/tether.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "api/rank_server.hpp"
#include "api/service_record.hpp"
#include "backend/backend.hpp"
#include "backend/float_mode.hpp"
#include "center/center_settings.hpp"
#include "cluster/cluster_settings.hpp"
#include "record/run_verdict.hpp"
#include "transport/peer_identity.hpp"
#include "worker/parameter_layout.hpp"
#include "worker/server_sessions.hpp"
#include "worker/settings_request.hpp"
#include "worker/worker_settings.hpp"

namespace tether {

ServiceOptions with_center_settings(Transport& transport, const std::string& address, ServiceOptions o,
                                    std::size_t count) {
    if (!o.strategy.empty() && o.workers > 0) return o;
    // Only the channel's settings (timeouts, heartbeat) are read from these: any distributed
    // strategy gives the same.
    ServiceOptions channel_options = o;
    channel_options.strategy = R"({"name": "downpour"})";
    channel_options.workers = std::max<std::int64_t>(1, o.workers);
    const ClusterSettings settings = cluster_settings(channel_options, count);
    const std::string server0 = split_addresses(address, "WorkerClient::connect address").front();
    auto channel = transport.connect(server0, unique_peer_identity("api-ask"), settings.worker_transport(server0));
    const nlohmann::json agreed = ask_agreed_settings(*channel, server0, o.join_timeout_ms);
    if (o.strategy.empty()) o.strategy = agreed.at("strategy").dump();
    if (o.workers <= 0) o.workers = agreed.at("cluster").value("workers", 1);
    return o;
}

namespace {

std::vector<ParameterSegment> segments_of(const std::vector<ParameterSpan>& parameters) {
    std::vector<ParameterSegment> segments;
    for (const auto& p : parameters) segments.push_back({p.data, p.count});
    return segments;
}

class Worker final : public WorkerClient {
public:
    // `rank`: this rank's part of a run with a server on every rank, whose lost ranges it finds
    // served on elsewhere (api/rank_server.hpp); null otherwise.
    Worker(std::shared_ptr<Transport> transport, const std::string& address, const ServiceOptions& given,
           std::vector<ParameterSegment> parameters, Memory memory, std::vector<ParameterSegment> buffers = {},
           std::shared_ptr<RankServer> rank = nullptr)
        : transport_(std::move(transport)), rank_(std::move(rank)) {
        // Checked before joining: a refused buffer must not take one of the center's places.
        const std::size_t count = check_parameter_segments(parameters);
        const std::size_t buffer_count = check_buffer_segments(parameters, buffers);
        const ServiceOptions o = with_center_settings(*transport_, address, given, count);
        const ClusterSettings settings = cluster_settings(o, count);
        const std::string identity = unique_peer_identity("api-worker");
        std::vector<ServerLink> links = connect_servers(settings, *transport_, address, "WorkerClient::connect address",
                                                         identity, settings.server_identities(count, api_model(buffer_count)));
        if (!o.standby_address.empty()) {
            if (links.size() != 1)
                throw ConfigError("ServiceOptions.standby_address: \"" + o.standby_address + "\" with " +
                                  std::to_string(links.size()) + " servers; a standby stands in for a center of one server");
            // The same identity: the standby knows this worker by its id, as a restarted center does.
            links[0].successor = [transport = transport_, to = o.standby_address, identity,
                                  options = settings.worker_transport(o.standby_address)](const PulledRange&) {
                return Successor{transport->connect(to, identity, options), "the standby", to};
            };
        }
        for (std::size_t k = 0; rank_ && k < links.size(); ++k) {
            if (k == std::size_t(o.rank)) continue;  // its own, in-process
            links[k].keep_pulled = rank_->keeps_pulled(k);
            links[k].successor = [rank = rank_, k, lost = links[k].address, transport = transport_, identity,
                                  options = settings.worker_transport("tcp://")](const PulledRange& pulled) {
                const std::string to = rank->successor(k, lost, pulled);
                if (to.empty()) return Successor{};
                return Successor{transport->connect(to, identity, options),
                                 "rank " + std::string(k == 0 ? "1" : "0") + ", serving server " + std::to_string(k) +
                                     "'s range", to};
            };
        }
        backend_ = make_backend({memory == Memory::cuda ? "cuda" : "cpu", 1, /*cuda_device=*/-1});
        WorkerOptions options = worker_options(settings);
        options.buffer_count = buffer_count;
        node_ = std::make_unique<WorkerNode>(std::move(links), options, count);
        // A launched rank's place follows its rank (run/worker_run.cpp does the same for `tether worker`).
        if (o.rank > 0) node_->ask_for_place(std::uint32_t(std::size_t(o.rank) % std::size_t(settings.workers)));
        const Welcome welcome = node_->join();
        id_ = welcome.worker_id;
        place_samples_ = welcome.trained;
        window_ = settings.strategy->communication_window();
        node_->start(*backend_, std::move(parameters), settings.strategy->make_worker_rule({int(settings.workers), count}),
                     welcome, std::move(buffers));
        // A place that trained before (a restarted rank's, a lost worker's): its claims count on
        // from the place's record, as the center's do, so what this process trains counts.
        if (welcome.trained > 0) node_->count_from(welcome.trained);
    }
    bool step(std::size_t samples) override {
        if (finished_) throw std::runtime_error(after_finish("step()"));
        return node_->after_step(samples);
    }
    void log(const std::vector<std::pair<std::string, double>>& scalars) override { node_->log(scalars); }
    WorkerReport finish() override {
        if (finished_) throw std::runtime_error(after_finish("finish()"));
        finished_ = true;  // also when the final exchange fails: the worker has said or lost its goodbye
        const WorkerResult r = node_->finish();
        // Rank 0's (and for range 0 rank 1's) worker no longer exchanges, so no longer finds a
        // lost server silent: what it last pulled of each range it stands in for stays with the
        // rank's server, which takes a range over when the others say it is lost (api/rank_server.hpp).
        for (std::size_t k = 0; rank_ && k < node_->servers(); ++k)
            if (rank_->keeps_pulled(k)) rank_->keep_final_pulled(k, node_->pulled(k));
        return {r.worker_id, r.steps, r.samples, r.exchanges, r.bytes_sent, r.bytes_received, r.seconds_waiting,
                r.rejoins};
    }
    unsigned id() const override { return id_; }
    bool running() const override { return !finished_ && !node_->budget_met(); }
    Lease lease(std::uint64_t samples, std::uint64_t total) override {
        if (finished_) throw std::runtime_error(after_finish("lease()"));
        return node_->next_lease(samples, total);
    }
    void ask_lease(std::uint64_t samples, std::uint64_t total) override {
        if (finished_) throw std::runtime_error(after_finish("ask_lease()"));
        node_->ask_lease(samples, total);
    }
    int communication_window() const override { return window_; }
    std::uint64_t place_samples() const override { return place_samples_; }

private:
    std::string after_finish(const char* call) const {
        return "WorkerClient::" + std::string(call) + ": worker " + std::to_string(id_) +
               " has finished (finish() was called: its last exchange and its goodbye went out); the center no longer "
               "counts it. Connect a new worker to train on";
    }

    bool finished_ = false;
    std::shared_ptr<Transport> transport_;
    std::shared_ptr<RankServer> rank_;  // with a server on every rank
    std::unique_ptr<Backend> backend_;  // before node_: the rule's buffers live in its memory
    std::unique_ptr<WorkerNode> node_;
    unsigned id_ = 0;
    std::uint64_t place_samples_ = 0;
    int window_ = 1;
};

// A rank's server (ServiceOptions.server_placement "ranks") other than rank 0's, given no
// strategy: it takes server 0's, as its worker would.
ServiceOptions with_rank0_settings(const ServiceOptions& o, std::size_t count) {
    if (o.server_placement != "ranks" || o.rank == 0 || !o.strategy.empty()) return o;
    if (o.server0_address.empty())
        throw ConfigError("ServiceOptions.server0_address: empty with server_placement \"ranks\" and rank " +
                          std::to_string(o.rank) + "; give rank 0's server's address (tcp://HOST:PORT)");
    auto transport = make_zmq_transport();
    return with_center_settings(*transport, o.server0_address, o, count);
}

class Service final : public CenterService {
public:
    Service(std::vector<float> initial, const ServiceOptions& given, std::vector<float> initial_buffers)
        : options_(with_rank0_settings(given, initial.size())), transport_(make_zmq_transport()), count_(initial.size()),
          settings_(cluster_settings(options_, count_, &blocks_)) {
        static std::atomic<unsigned> counter{0};
        const ServiceOptions& o = options_;
        const ClusterSettings& settings = settings_;
        const nlohmann::json model = api_model(initial_buffers.size());
        const std::vector<ServerIdentity> identities = settings.server_identities(count_, model);
        if (settings.servers_on_ranks())
            rank_ = std::make_shared<RankServer>(transport_, o, settings, identities, initial, initial_buffers);
        const std::size_t first = rank_ ? std::size_t(o.rank) : 0;
        // This rank's worker reaches its own server in-process (no socket, no handshake).
        if (rank_) own_ = "inproc://tether-rank-" + std::to_string(counter++);
        // Back to a run under way without its state: rank 0 serves its range; its own server
        // binds nowhere the others reach (x~(0) there would undo the run) and stops at connect.
        const bool back = rank_ && rank_->comes_back();
        const std::vector<std::string> bind =
            back ? std::vector<std::string>{"inproc://tether-rank-idle-" + std::to_string(counter++)}
            : rank_ ? std::vector<std::string>{o.address}
                  : settings.bind_addresses([] { return "inproc://tether-api-" + std::to_string(counter++); });
        group_ = make_servers(settings, *transport_, bind, first, identities, initial, [&](CenterOptions& c, std::size_t index) {
            // Its center ends when its workers are all gone, and the caller's wait() decides what
            // comes next; ServiceOptions.center_restart_ms is its workers' window for a lost center.
            c.end.center_restart_ms = 0;
            if (rank_) rank_->adjust(c, index);
        }, own_);
        if (rank_) rank_->attach(*group_);
        // The model buffers live on server 0 alone (b~ is small; its workers send it theirs).
        if (!initial_buffers.empty() && first == 0) group_->center(0).hold_buffers(std::move(initial_buffers));
        ServiceOptions record_options = o;
        record_options.run_dir = record_directory(o);
        if (!o.run_dir.empty())  // resumes from its checkpoint: after the buffers are held
            record_ = std::make_unique<ServiceRecord>(record_options, std::move(blocks_), identities.front().agreed.at("model"),
                                                      settings, *group_, identities);
        else if (o.resume)
            throw ConfigError("ServiceOptions.resume: true without ServiceOptions.run_dir; name the run directory to resume");
        // What moved when, in the summary.
        if (record_ && rank_)
            record_->amend_summary([rank = rank_](nlohmann::json& summary, const auto& seconds_at) {
                nlohmann::json moves = nlohmann::json::array();
                for (const RankServer::Move& m : rank->moves())
                    moves.push_back({{"server", m.server}, {"from_version", m.version}, {"at_seconds", seconds_at(m.at)}});
                if (!moves.empty()) summary["ranges_taken_over"] = moves;
            });
        thread_ = std::thread([this] {
            set_flush_denormals(options_.flush_denormals);  // the servers' own threads, not the caller's
            try {
                const bool flush = options_.flush_denormals;
                group_->serve([flush] { set_flush_denormals(flush); });
            } catch (...) {
                failure_ = std::current_exception();
            }
            served_ = true;
            if (!record_) return;
            try {
                record_->finish(failure_, transport_->refused_handshakes());
            } catch (...) {
                if (!failure_) failure_ = std::current_exception();  // e.g. the disk is full: wait() says so
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
    std::string address() const override { return group_->address(); }
    std::unique_ptr<WorkerClient> connect_worker(std::vector<ParameterSpan> parameters, Memory memory,
                                                 std::vector<ParameterSpan> buffers) override {
        // With a server on every rank: every server, once all ranks said where (this rank's own
        // in-process).
        const std::string servers = rank_ ? rank_->addresses(own_) : address();
        // This rank was lost and came back after a survivor took its range over: its worker
        // trains on, its server has nothing to serve.
        if (rank_ && rank_->moved()) group_->stop();
        return std::make_unique<Worker>(transport_, servers, options_, segments_of(parameters), memory, segments_of(buffers),
                                        rank_);
    }
    CenterSnapshot snapshot() const override {
        // Each range between two of its server's updates (center/server_group.hpp); the version is server 0's.
        {
            std::lock_guard<std::mutex> lock(ended_mutex_);
            if (!ended_.x.empty()) return ended_;  // rank 1, having ended the run in a lost rank 0's stead
        }
        CenterSnapshot s;
        s.x.resize(count_);
        s.version = group_->copy_ranges(s.x.data(), ~std::size_t(0), &s.buffers).front();
        if (rank_) rank_->fetch_others(s.x.data(), /*final=*/false);
        return s;
    }
    std::vector<float> wait() override {
        std::lock_guard<std::mutex> lock(wait_mutex_);  // one joins, the others find it joined
        if (rank_ && options_.rank == 1 && thread_.joinable()) end_for_rank0();
        if (thread_.joinable()) thread_.join();
        if (ended_failure_) std::rethrow_exception(ended_failure_);
        if (failure_) std::rethrow_exception(failure_);
        if (ended()) return judged(group_->stats_now(), snapshot().x);  // rank 1 for a lost rank 0
        if (rank_ && options_.rank > 0) {  // rank 0's wait() gives x~ and the verdict
            if (rank_->moved()) return {};     // its range is served elsewhere
            // ... unless this rank's range never reached it: then no rank's run succeeded.
            const std::string missing = group_->final_missing();
            if (!missing.empty()) throw RunFailedError("the run failed: rank " + std::to_string(options_.rank) + "'s " + missing);
            return {};
        }
        if (rank_) rank_->fetch_others(nullptr, /*final=*/true);  // once: the others leave on it
        return judged(group_->stats_now(), snapshot().x);
    }
    // The verdict of `tether run` and `tether server` (record/run_verdict.hpp), from the
    // center's counters: a run that lost too many workers did not train what it was asked to.
    // `x`: x~ whole, returned when the run succeeded.
    std::vector<float> judged(const CenterStats& stats, std::vector<float> x) const {
        nlohmann::json summary = stats.to_json();
        // With a budget the plan is known: a run that stopped short of it fails, naming both figures.
        if (settings_.budget_samples > 0) {
            summary["samples_planned"] = settings_.budget_samples;
            summary["samples"] = stats.total_samples;
        }
        judge_run(summary, settings_, {});
        if (summary.value("run_failed", false))
            throw RunFailedError("the run failed: " + summary.value("failure_reason", std::string()) +
                                 ". The final x~ is still there: snapshot(), and the counters: stats_json()");
        return x;
    }
    std::string stats_json() const override { return group_->stats_now().to_json().dump(); }
    bool is_center() const override { return !rank_ || options_.rank == 0 || rank_->serves_center(); }

private:
    // Rank 1 standing in for a lost rank 0 (api/rank_server.hpp): once it took range 0 over and
    // the workers are all done (its own server sees every one), its final fetch is the one every
    // server, its own too, leaves on, and the run's summary.json is its own. Returns at once
    // when its server ends first (rank 0's final fetch took its range).
    void end_for_rank0() {
        while (!served_ && !(rank_->serves_center() && group_->stats_now().live_workers() <= 0))
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (served_) return;
        try {
            CenterSnapshot s = rank_->end_as_center(record_directory(options_));
            std::lock_guard<std::mutex> ended(ended_mutex_);
            ended_ = std::move(s);
        } catch (...) {
            ended_failure_ = std::current_exception();
            group_->stop();  // the workers are done; its server would wait for the final request in vain
        }
        thread_.join();
        if (!record_) return;
        nlohmann::json changes = {{"ended_by_rank", 1}};
        if (ended_failure_) {
            try {
                std::rethrow_exception(ended_failure_);
            } catch (const std::exception& e) {
                changes["run_failed"] = true;
                changes["failure_reason"] = "rank 1 took a lost rank 0's range over, but its final fetch of the ranges failed: " +
                                            std::string(e.what());
            }
        }
        record_->copy_summary(options_.run_dir, changes);
    }
    bool ended() const {
        std::lock_guard<std::mutex> lock(ended_mutex_);
        return !ended_.x.empty();
    }
    ServiceOptions options_;
    std::shared_ptr<Transport> transport_;
    std::size_t count_;
    nlohmann::json blocks_;  // the settings as resolved, for a run directory's config.json (before settings_)
    ClusterSettings settings_;
    std::unique_ptr<ServerGroup> group_;
    std::shared_ptr<RankServer> rank_;      // with a server on every rank: this rank's part (its worker's too)
    std::string own_;                       // and where its worker reaches it (inproc://)
    std::unique_ptr<ServiceRecord> record_;  // the run directory, with ServiceOptions::run_dir
    std::mutex wait_mutex_;
    mutable std::mutex ended_mutex_;  // ended_ (snapshot() reads it from any thread)
    CenterSnapshot ended_;            // rank 1, having ended the run in a lost rank 0's stead: the final state
    std::exception_ptr ended_failure_;  // its final fetch's failure (wait()'s thread alone)
    std::atomic<bool> served_{false};  // the servers' thread has ended
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
