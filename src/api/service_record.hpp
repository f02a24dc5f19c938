// The embedding API's run directory (ServiceOptions::run_dir): the files `tether run` writes,
// from what a CenterService knows. It has no data and no model of its own, so it evaluates
// nothing: metrics.jsonl holds the center's exchange statistics at a cadence of time and/or
// samples (the columns of a distributed run's rows besides the evaluation's), and the rows of
// scalars its workers log (WorkerClient::log), tagged with the worker; a worker that logs
// validation_accuracy makes the curve that summary.json and experiments/plot.py read.
// Checkpoints, resuming and exchanges.jsonl are the tether command's (record/server_records.hpp),
// and so are the summary's center figures, provenance and verdict.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <string>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "center/server_group.hpp"
#include "cluster/cluster_settings.hpp"
#include "record/run_recorder.hpp"
#include "record/server_records.hpp"

namespace tether {

// What the API knows of a model besides its parameter count, agreed with every worker: the
// elements of its buffers (b~), so a worker with other buffers is refused naming them.
inline nlohmann::json api_model(std::size_t buffer_count) { return {{"buffers", buffer_count}}; }

// A worker (or a standby) given no strategy (or no workers) takes the center's: asked of server
// 0 at `address` before joining, so that its hello carries the agreed settings the center expects.
ServiceOptions with_center_settings(Transport& transport, const std::string& address, ServiceOptions o, std::size_t count);

// Where a CenterService with `options` keeps its records: run_dir, or with a server on every
// rank, rank k > 0's run_dir/server-k.
std::string record_directory(const ServiceOptions& options);

class ServiceRecord {
public:
    // Reads the run-directory options of `options` (a ConfigError names ServiceOptions.KEY),
    // writes config.json (`blocks`: the cluster, security and strategy blocks as resolved, plus
    // `model`), resumes every server of `group` from its checkpoint with options.resume, and
    // hooks the servers' checkpoints, exchanges and server 0's workers' logs. Before serve().
    ServiceRecord(const ServiceOptions& options, nlohmann::json blocks, const nlohmann::json& model,
                  const ClusterSettings& settings, ServerGroup& group, const std::vector<ServerIdentity>& identities);
    ~ServiceRecord();

    // Once the group has served, or failed with `failure`: the last row and summary.json (the
    // run failed when `failure` is set, with its message as the reason).
    void finish(std::exception_ptr failure, std::uint64_t refused_handshakes);

    // What else the summary says, given how many seconds into the run a moment was: with a
    // server on every rank, the ranges this rank took over (api/rank_server.hpp). Before serve().
    using Amend = std::function<void(nlohmann::json& summary,
                                     const std::function<double(std::chrono::steady_clock::time_point)>& seconds_at)>;
    void amend_summary(Amend amend) { amend_ = std::move(amend); }
    // After finish(): its summary.json, with `changes` merged in, written into `directory` too
    // (rank 1 having ended the run for a lost rank 0: the run's own summary, where rank 0's is).
    void copy_summary(const std::string& directory, const nlohmann::json& changes) const;

private:
    using Clock = std::chrono::steady_clock;
    void loop();            // the metrics thread: a row when one is due
    void row(bool final);   // the center's statistics now, unless unchanged since the last row (final)
    double seconds() const;

    ClusterSettings settings_;
    ServerGroup& group_;
    std::uint64_t fingerprint_;
    nlohmann::json model_;
    double metrics_seconds_ = 0;
    std::uint64_t metrics_samples_ = 0;
    std::unique_ptr<ServerRecords> records_;  // first: a refused resume leaves the directory as it was
    std::unique_ptr<RunRecorder> recorder_;

    mutable std::mutex mutex_;  // the fields below
    std::condition_variable wake_;
    bool stop_ = false;
    bool started_ = false;  // training started: all workers joined (or a resumed center serves)
    Clock::time_point start_;
    CenterStats previous_;
    double previous_seconds_ = 0;
    std::uint64_t previous_version_ = 0, next_samples_ = 0;
    bool wrote_row_ = false;
    nlohmann::json last_test_ = nlohmann::json::object();  // the last test_accuracy / test_loss a worker logged
    Amend amend_;  // set before the group serves
    nlohmann::json summary_;  // as finish() wrote it
    std::thread thread_;  // last: it starts once the fields above exist
};

}  // namespace tether
