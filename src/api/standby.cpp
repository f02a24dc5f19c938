// tether::Standby (include/tether/tether.hpp): a center in waiting. A thread asks the center
// for x~ as any trusted peer may (a snapshot request, center/remote_ranges.hpp), keeps the last
// copy, and once the center has not answered within worker_timeout_ms, becomes the center:
// the copy goes into the run directory as a checkpoint, and a CenterService resumes from it at
// the standby's own address, where the workers fail over (worker/server_session.cpp).
#include <tether/tether.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "api/service_record.hpp"
#include "center/checkpoint.hpp"
#include "center/remote_ranges.hpp"
#include "cluster/cluster_settings.hpp"
#include "record/server_records.hpp"
#include "transport/transport.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

class StandbyCenter final : public Standby {
public:
    StandbyCenter(std::vector<float> initial, const ServiceOptions& o, const std::string& center,
                  std::vector<float> initial_buffers)
        : center_address_(center), initial_(std::move(initial)), buffers_(std::move(initial_buffers)),
          transport_(make_zmq_transport()) {
        if (o.run_dir.empty())
            throw ConfigError("Standby: ServiceOptions.run_dir is empty; a standby takes over from a checkpoint it writes "
                              "there (name the run directory, on this host)");
        if (o.servers != 1)
            throw ConfigError("Standby: ServiceOptions.servers is " + std::to_string(o.servers) +
                              "; a standby stands in for a center of one server");
        options_ = with_center_settings(*transport_, center, o, initial_.size());  // the center's strategy and workers
        const ClusterSettings settings = cluster_settings(options_, initial_.size());
        fingerprint_ = settings.server_identities(initial_.size(), api_model(buffers_.size())).front().fingerprint;
        copy_.x = initial_;
        copies_ranges_ = std::make_unique<RemoteRanges>(
            *transport_, std::vector<RemoteServer>{{0, {0, initial_.size()}, center, fingerprint_}},
            settings.worker_transport(center), std::size_t(settings.chunk_elements), int(settings.worker_timeout_ms), nullptr);
        thread_ = std::thread([this] { loop(); });
    }
    ~StandbyCenter() override {
        stand_down();
        if (thread_.joinable()) thread_.join();
    }
    bool took_over() const override { return center_ready_.load(); }
    CenterService* center() override { return center_ready_.load() ? center_.get() : nullptr; }
    bool stand_down() override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopped_ = true;
        }
        wake_.notify_all();
        return took_over();
    }
    std::uint64_t copies() const override { return copies_.load(); }

private:
    void loop() {
        const auto every = std::chrono::duration<double>(options_.standby_seconds);
        while (true) {
            std::vector<float> x(initial_.size());
            bool answered = false, silent = false;
            try {
                copies_ranges_->fetch(x.data(), /*final=*/false);
                answered = true;
            } catch (const RangeSilent&) {
                silent = true;  // no answer for worker_timeout_ms: lost, once it has answered before
            } catch (const std::exception& e) {
                // It answered, with a refusal: alive. Said, and asked again at the next copy.
                std::fprintf(stderr, "standby: the center at %s refused a copy of x~: %s\n", center_address_.c_str(), e.what());
            }
            std::unique_lock<std::mutex> lock(mutex_);
            if (stopped_) return;
            if (silent && copies_ > 0) break;
            if (answered) {
                copy_.x = std::move(x);
                copy_.version = copies_ranges_->answered().front().version;
                copy_.total_samples = copies_ranges_->answered().front().samples;
                ++copies_;
            }
            // A silence before the first copy is a center not up yet, no center lost.
            if (!silent && wake_.wait_for(lock, every, [this] { return stopped_; })) return;
        }
        try {
            take_over();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "standby: could not take over from the center at %s: %s\n", center_address_.c_str(), e.what());
        }
    }

    void take_over() {
        // The newest of its copy and a checkpoint the center left in a run directory both can see.
        const std::string path = checkpoint_path(options_.run_dir, 1, 0);
        bool own_copy = true;
        std::uint64_t version = copy_.version;
        if (resumable_checkpoint(options_.run_dir, 1, 0)) {
            try {
                const Checkpoint there = read_checkpoint(path);
                own_copy = there.fingerprint != fingerprint_ || there.version < copy_.version;
                if (!own_copy) version = there.version;
            } catch (const std::exception&) {
            }
        }
        copy_.fingerprint = fingerprint_;
        copy_.buffers = buffers_;
        if (own_copy) {
            std::filesystem::create_directories(options_.run_dir);
            write_checkpoint(path, copy_);
        }
        std::fprintf(stderr, "standby: the center at %s has been silent for %lld ms (worker_timeout_ms); taking over at %s "
                     "from %s at version %llu\n", center_address_.c_str(), static_cast<long long>(options_.worker_timeout_ms),
                     options_.address.c_str(), own_copy ? "its copy" : path.c_str(), static_cast<unsigned long long>(version));
        ServiceOptions o = options_;
        o.resume = true;
        o.standby_address.clear();  // this is the center now
        // A resumed center waits for every place to come back before it may end; the lost
        // center's own worker never does. The others fail over within worker_timeout_ms of
        // losing it, as this standby does: twice that is their window to join again.
        o.join_timeout_ms = std::min(o.join_timeout_ms, 2 * o.worker_timeout_ms);
        center_ = CenterService::start(initial_, o, buffers_);
        center_ready_ = true;
    }

    ServiceOptions options_;
    std::string center_address_;
    std::vector<float> initial_, buffers_;
    std::shared_ptr<Transport> transport_;
    std::uint64_t fingerprint_ = 0;
    std::unique_ptr<RemoteRanges> copies_ranges_;
    Checkpoint copy_;
    std::atomic<std::uint64_t> copies_{0};
    std::unique_ptr<CenterService> center_;
    std::atomic<bool> center_ready_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopped_ = false;
    std::thread thread_;
};

}  // namespace

std::unique_ptr<Standby> Standby::start(std::vector<float> initial, const ServiceOptions& options, const std::string& center,
                                        std::vector<float> initial_buffers) {
    return std::make_unique<StandbyCenter>(std::move(initial), options, center, std::move(initial_buffers));
}

}  // namespace tether
