#include "center/server_directory.hpp"

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace tether {

namespace {

std::string hex(std::uint64_t value) {
    char text[17];
    std::snprintf(text, sizeof text, "%016" PRIx64, value);
    return text;
}

}  // namespace

ServerDirectory::ServerDirectory(std::size_t servers, std::uint64_t initial_hash)
    : initial_hash_(initial_hash), addresses_(servers), moved_(servers, false), entered_(servers) {}

std::vector<std::size_t> ServerDirectory::missing_locked() const {
    std::vector<std::size_t> missing;
    for (std::size_t k = 0; k < addresses_.size(); ++k)
        if (addresses_[k].empty()) missing.push_back(k);
    return missing;
}

ServerDirectory::Answer ServerDirectory::enter(std::size_t server, const std::string& address, std::uint64_t initial_hash) {
    Answer answer;
    if (server >= addresses_.size()) {
        answer.error = "server " + std::to_string(server) + " of " + std::to_string(addresses_.size()) +
                       ": the run has servers 0.." + std::to_string(addresses_.size() - 1) + " (one per rank)";
        return answer;
    }
    if (initial_hash != initial_hash_) {
        answer.error = "rank " + std::to_string(server) + " starts its range of x~ from another model than rank 0 (x~(0) hash " +
                       hex(initial_hash) + ", rank 0's " + hex(initial_hash_) + "): with a server on every rank, each serves "
                       "its range from its own initial parameters, so every rank must build the same model from the same "
                       "seed (e.g. torch.manual_seed(seed) on every rank before building the model)";
        return answer;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (copy_) {
        answer.error = "this server keeps a copy of the directory, to say where a lost rank 0's range went; tell server 0 "
                       "where server " + std::to_string(server) + " listens";
        return answer;
    }
    if (moved_[server]) {  // a survivor serves its range: the restarted rank is a worker now
        answer.addresses = addresses_;
        return answer;
    }
    // Once every server is known the workers and server 0 hold the list: a server may say
    // again where it is (its rank restarted on the same host), but not move.
    if (missing_locked().empty() && addresses_[server] != address) {
        answer.error = "server " + std::to_string(server) + " is at " + addresses_[server] + ", and every rank holds that "
                       "address; it cannot move to " + address + " (restart rank " + std::to_string(server) +
                       " on its host, or restart the job)";
        return answer;
    }
    addresses_[server] = address;
    entered_[server] = std::chrono::steady_clock::now();
    answer.missing = missing_locked();
    if (answer.missing.empty()) {
        answer.addresses = addresses_;
        complete_.notify_all();
    }
    return answer;
}

ServerDirectory::Answer ServerDirectory::where(std::size_t server, const std::string& lost) {
    Answer answer = where_locked(server, lost);
    std::function<void(std::size_t)> hook;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        hook = on_under_way_;
    }
    if (answer.under_way && hook) hook(server);  // the asker asks again: moved by then, or not
    return answer;
}

void ServerDirectory::set_on_under_way(std::function<void(std::size_t server)> hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    on_under_way_ = std::move(hook);
}

ServerDirectory::Answer ServerDirectory::where_locked(std::size_t server, const std::string& lost) const {
    Answer answer;
    std::lock_guard<std::mutex> lock(mutex_);
    if (server >= addresses_.size()) {
        answer.missing = {server};
    } else if (!missing_locked().empty()) {
        answer.missing = missing_locked();
    } else if (!moved_[server] || addresses_[server] == lost) {
        answer.missing = {server};
        answer.under_way = true;
    } else {
        answer.addresses = addresses_;
    }
    return answer;
}

void ServerDirectory::copy(const std::vector<std::string>& addresses) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (addresses.size() != addresses_.size())
        throw std::logic_error("ServerDirectory::copy: " + std::to_string(addresses.size()) + " addresses for " +
                               std::to_string(addresses_.size()) + " servers");
    addresses_ = addresses;
    copy_ = true;
    complete_.notify_all();
}

void ServerDirectory::move(std::size_t server, const std::string& address) {
    std::lock_guard<std::mutex> lock(mutex_);
    addresses_.at(server) = address;
    moved_.at(server) = true;
}

bool ServerDirectory::entered_within(std::size_t server, std::chrono::milliseconds window) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::chrono::steady_clock::now() - entered_.at(server) < window;
}

std::vector<std::string> ServerDirectory::addresses(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!complete_.wait_for(lock, timeout, [&] { return missing_locked().empty(); })) {
        std::string missing;
        for (std::size_t k : missing_locked()) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
        throw std::runtime_error("the servers of rank(s) " + missing + " did not say where they listen within " +
                                 std::to_string(timeout.count()) + " ms (cluster.join_timeout_ms); is every rank running?");
    }
    return addresses_;
}

std::uint64_t initial_vector_hash(const float* x, std::size_t count) {
    std::uint64_t h = 1469598103934665603ull;
    const auto* bytes = reinterpret_cast<const unsigned char*>(x);
    for (std::size_t i = 0; i < count * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
    return h;
}

std::string directory_request(std::size_t server, const std::string& address, std::uint64_t initial_hash, bool lost) {
    nlohmann::json j{{"server", server}, {"address", address}, {"initial", hex(initial_hash)}};
    if (lost) j["lost"] = true;
    return j.dump();
}

DirectoryRequest parse_directory_request(const std::string& text, std::size_t servers) {
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const auto bad = [&](const std::string& why) { return std::runtime_error("malformed servers request (" + why + ")"); };
    if (!j.is_object()) throw bad("not a JSON object");
    if (!j.contains("server") || !j["server"].is_number_unsigned() || j["server"].get<std::size_t>() >= servers)
        throw bad("\"server\" must be 0.." + std::to_string(servers - 1));
    if (!j.contains("address") || !j["address"].is_string() || j["address"].get<std::string>().rfind("tcp://", 0) != 0 ||
        j["address"].get<std::string>().size() > 256)
        throw bad("\"address\" must be tcp://HOST:PORT");
    if (!j.contains("initial") || !j["initial"].is_string() || j["initial"].get<std::string>().size() != 16)
        throw bad("\"initial\" must be 16 hex digits");
    DirectoryRequest r;
    r.server = j["server"].get<std::size_t>();
    r.address = j["address"].get<std::string>();
    const std::string digits = j["initial"].get<std::string>();
    char* end = nullptr;
    r.initial_hash = std::strtoull(digits.c_str(), &end, 16);
    if (end != digits.c_str() + digits.size()) throw bad("\"initial\" must be 16 hex digits");
    if (j.contains("lost") && !j["lost"].is_boolean()) throw bad("\"lost\" must be true or false");
    r.lost = j.value("lost", false);
    return r;
}

std::string directory_answer(const ServerDirectory::Answer& answer) {
    if (!answer.missing.empty()) {
        nlohmann::json j{{"missing", answer.missing}};
        if (answer.under_way) j["under_way"] = true;
        return j.dump();
    }
    return nlohmann::json{{"addresses", answer.addresses}}.dump();
}

}  // namespace tether
