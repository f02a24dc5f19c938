#include "api/service_record.hpp"

#include <tether/tether.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "record/center_figures.hpp"
#include "record/run_verdict.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

// The run directory's name, as a config file's "name": its last component.
std::string name_of(const std::string& run_dir) {
    const std::filesystem::path path = std::filesystem::path(run_dir).lexically_normal();
    const std::string name = path.filename().string();
    return name.empty() ? path.parent_path().filename().string() : name;
}

}  // namespace

std::string record_directory(const ServiceOptions& o) {
    if (o.server_placement == "ranks" && o.rank > 0) return rank_server_directory(o.run_dir, std::size_t(o.rank));
    return o.run_dir;
}

ServiceRecord::ServiceRecord(const ServiceOptions& o, nlohmann::json blocks, const nlohmann::json& model,
                             const ClusterSettings& settings, ServerGroup& group, const std::vector<ServerIdentity>& identities)
    : settings_(settings), group_(group), fingerprint_(identities.front().fingerprint), model_(model) {
    // The cadence (checked with the other options: cluster_settings), recorded.
    metrics_seconds_ = o.metrics_seconds;
    metrics_samples_ = std::uint64_t(o.metrics_samples);
    blocks["record"] = {{"metrics_seconds", o.metrics_seconds}, {"metrics_samples", o.metrics_samples}};
    records_ = std::make_unique<ServerRecords>(group, identities, o.run_dir, o.resume,
                                               "resume it with the options it was written with (its config.json)");
    RecordSettings record;
    record.name = name_of(o.run_dir);
    blocks["name"] = record.name;
    blocks["model"] = model;
    record.config = std::move(blocks);
    recorder_ = std::make_unique<RunRecorder>(std::move(record), o.run_dir, o.resume);
    start_ = Clock::now();
    // Wall time counts from when the workers start training, as in `tether run`; a resumed
    // center welcomes each worker as it comes, and its clock starts now.
    started_ = o.resume;
    Center& lead = group.center(0);
    lead.on_start = [this] {
        std::lock_guard<std::mutex> lock(mutex_);
        start_ = Clock::now();
        started_ = true;
    };
    // On server 0's thread, its state locked: takes only this record's own locks.
    lead.on_log = [this](const LogRecord& r) {
        nlohmann::json row = r.scalars;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            row["wall_seconds"] = std::chrono::duration<double>(Clock::now() - start_).count();
            for (const char* key : {"test_accuracy", "test_loss"})
                if (r.scalars.contains(key) && r.scalars[key].is_number()) last_test_[key] = r.scalars[key];
        }
        row["samples"] = r.total_samples;
        row["worker"] = r.worker_id;
        row["worker_samples"] = r.worker_samples;
        recorder_->append(row);
    };
    thread_ = std::thread([this] { loop(); });
}

ServiceRecord::~ServiceRecord() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

double ServiceRecord::seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void ServiceRecord::loop() {
    // A row by samples lands within 20 ms of the count passing its multiple (an atomic read per
    // wake-up); by time, within 100 ms of being due.
    const double poll_seconds = std::min(metrics_seconds_ > 0 ? metrics_seconds_ : 0.1, metrics_samples_ > 0 ? 0.02 : 0.1);
    const auto poll = std::chrono::duration<double>(poll_seconds);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, poll, [&] { return stop_; })) {
        if (!started_) continue;
        const double now = seconds();
        // Never calls into the center with mutex_ held: the center's thread takes mutex_ (on_log,
        // on_start) with its own state locked.
        lock.unlock();
        const bool due = !wrote_row_ || (metrics_seconds_ > 0 && now - previous_seconds_ >= metrics_seconds_) ||
                         (metrics_samples_ > 0 && group_.center(0).live_samples() >= next_samples_);
        if (due) row(false);
        lock.lock();
    }
}

void ServiceRecord::row(bool final) {
    const CenterStats stats = group_.stats_now();
    const std::uint64_t version = group_.center(0).live_version();
    double now = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        now = seconds();
    }
    if (final && wrote_row_ && stats.total_samples == previous_.total_samples && version == previous_version_) return;
    nlohmann::json r = {{"wall_seconds", now}, {"training_seconds", now}, {"samples", stats.total_samples}};
    r.update(exchange_figures(stats, version, previous_, now - previous_seconds_));
    recorder_->append(r);
    previous_ = stats;
    previous_seconds_ = now;
    previous_version_ = version;
    wrote_row_ = true;
    if (metrics_samples_ > 0) next_samples_ = (stats.total_samples / metrics_samples_ + 1) * metrics_samples_;
}

void ServiceRecord::finish(std::exception_ptr failure, std::uint64_t refused_handshakes) {
    bool started = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
        started = started_;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    records_->flush();
    if (started) row(/*final=*/true);
    nlohmann::json extra = center_summary(group_, settings_, fingerprint_, refused_handshakes);
    extra["mode"] = "api";
    extra["parameters"] = model_.value("parameters", nlohmann::json(nullptr));
    extra["buffers"] = model_.value("buffers", nlohmann::json(nullptr));
    if (settings_.budget_samples > 0) {  // the plan: judged on it (record/run_verdict.hpp)
        extra["samples_planned"] = settings_.budget_samples;
        extra["budget_samples"] = settings_.budget_samples;
    }
    double wall = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        wall = seconds();
        // The API evaluates nothing itself: the test figures are the last a worker logged.
        for (const auto& [key, value] : last_test_.items()) extra["final_" + key] = value;
    }
    nlohmann::json summary = recorder_->finish(wall, wall, group_.stats().total_samples, std::nullopt, extra);
    judge_run(summary, settings_, {});
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            summary["run_failed"] = true;
            summary["failure_reason"] = e.what();
        }
    }
    if (amend_) {
        Clock::time_point start;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            start = start_;
        }
        amend_(summary, [start](Clock::time_point at) { return std::chrono::duration<double>(at - start).count(); });
    }
    write_json_file(recorder_->directory() + "/summary.json", summary);
    std::lock_guard<std::mutex> lock(mutex_);
    summary_ = std::move(summary);
}

void ServiceRecord::copy_summary(const std::string& directory, const nlohmann::json& changes) const {
    nlohmann::json summary;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        summary = summary_;
    }
    summary.update(changes);
    write_json_file(directory + "/summary.json", summary);
}

}  // namespace tether
