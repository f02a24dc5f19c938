#include "record/server_records.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "center/checkpoint.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

// Seconds since the file was written (its modification time); unset when unknown.
std::optional<double> age_of(const std::string& path) {
    std::error_code error;
    const auto written = std::filesystem::last_write_time(path, error);
    if (error) return std::nullopt;
    return std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - written).count();
}

}  // namespace

std::string checkpoint_path(const std::string& directory, std::size_t servers, std::size_t server) {
    return directory + (servers == 1 ? "/checkpoint.bin" : "/checkpoint-server-" + std::to_string(server) + ".bin");
}

bool resumable_checkpoint(const std::string& directory, std::size_t servers, std::size_t server) {
    std::error_code error;
    const auto checkpoint = std::filesystem::last_write_time(checkpoint_path(directory, servers, server), error);
    if (error) return false;
    const auto summary = std::filesystem::last_write_time(directory + "/summary.json", error);
    return error || checkpoint > summary;
}

std::string rank_server_directory(const std::string& run_dir, std::size_t server) {
    return run_dir + "/server-" + std::to_string(server);
}

std::string final_range_path(const std::string& directory, std::size_t server) {
    return directory + "/final-server-" + std::to_string(server) + ".bin";
}

void write_final_ranges(const std::string& directory, const RemoteRanges& ranges, const float* x) {
    for (std::size_t i = 0; i < ranges.servers().size(); ++i) {
        const RemoteServer& s = ranges.servers()[i];
        Checkpoint c;
        c.fingerprint = s.fingerprint;
        c.version = ranges.answered()[i].version;
        c.total_samples = ranges.answered()[i].samples;
        c.x.assign(x + s.range.first, x + s.range.first + s.range.count);
        try {
            write_checkpoint(final_range_path(directory, s.index), c);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "server 0: server %zu's final range not kept: %s\n", s.index, e.what());
        }
    }
}

ServerRecords::ServerRecords(ServerGroup& group, const std::vector<ServerIdentity>& identities, const std::string& directory,
                             bool resume, const std::string& how_to_resume) {
    const std::size_t servers = identities.size();
    for (std::size_t i = 0; i < group.size(); ++i) {
        const std::size_t index = group.member(i).index;
        Center& center = group.center(i);
        const ServerIdentity& id = identities[index];
        const std::string path = checkpoint_path(directory, servers, index);
        if (resume) {
            const Checkpoint checkpoint = read_checkpoint(path);
            if (checkpoint.fingerprint != id.fingerprint || checkpoint.x.size() != id.range.count)
                throw ConfigError(path + ": written by a run with other settings (model, strategy, workers, servers, chunk "
                                  "elements, codecs or data); " + how_to_resume);
            center.resume(checkpoint);
            // What x~ gained after the checkpoint is lost: say how old it is (the updates lost
            // are counted as the workers rejoin: CenterStats::rolled_back_updates).
            const std::optional<double> seconds = age_of(path);
            if (seconds) checkpoint_age_ = std::max(checkpoint_age_.value_or(0.0), *seconds);
            char age[64] = "";
            if (seconds) std::snprintf(age, sizeof age, "written %.1f s ago", *seconds);
            resumed_.push_back((servers == 1 ? "" : "server " + std::to_string(index) + "/" + std::to_string(servers) + ": ") +
                               "resumed from " + path + " at center version " + std::to_string(checkpoint.version) + " (" +
                               std::to_string(checkpoint.total_samples) + " samples; " + (seconds ? std::string(age) + ": " : "") +
                               "what x~ gained after it is lost)");
        }
        center.on_checkpoint = [path](const Checkpoint& c) {
            try {
                write_checkpoint(path, c);
            } catch (const std::exception& e) {
                // A full disk must not end the run: the previous checkpoint stays in place.
                std::fprintf(stderr, "center: checkpoint not written: %s\n", e.what());
            }
        };
        center.on_exchange = [this, index, servers](const ExchangeRecord& r) {
            nlohmann::json line{{"worker", r.worker_id},           {"sequence", r.sequence},
                                {"version", r.version},             {"staleness", r.staleness},
                                {"bytes_to_center", r.bytes_received}, {"bytes_to_worker", r.bytes_sent},
                                {"update_norm", r.update_norm}};
            if (servers > 1) line["server"] = index;
            std::lock_guard<std::mutex> lock(mutex_);
            exchanges_ << line.dump() << "\n";
        };
    }
    std::error_code error;  // after the checkpoints: a refused resume creates nothing
    std::filesystem::create_directories(directory, error);
    if (error) throw std::runtime_error(directory + ": cannot create the run directory: " + error.message());
    // A resumed run's log goes on after the lines of the run it resumes.
    exchanges_.open(directory + "/exchanges.jsonl", resume ? std::ios::app : std::ios::trunc);
    if (!exchanges_) throw std::runtime_error(directory + "/exchanges.jsonl: cannot write");
}

void ServerRecords::flush() {
    std::lock_guard<std::mutex> lock(mutex_);
    exchanges_.flush();
}

}  // namespace tether
