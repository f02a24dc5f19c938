#include "worker/directory_request.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <thread>

#include "center/server_directory.hpp"
#include "protocol/header.hpp"
#include "transport/peer_identity.hpp"

namespace tether {

namespace {

// One ask: every server's address as server 0 answers, or none within 100 ms or while some are
// missing (then `missing` names them). Throws on a refusal, naming `what` was asked.
std::optional<std::vector<std::string>> ask_once(Channel& channel, const std::string& server0, std::uint64_t fingerprint,
                                                 const std::string& request, std::uint64_t sequence, std::size_t server,
                                                 const std::string& what, std::string& missing,
                                                 bool* under_way = nullptr) {
    using Clock = std::chrono::steady_clock;
    Header h;
    h.type = MessageType::servers;
    h.sequence = sequence;
    h.dtype = Dtype::utf8;
    h.element_count = request.size();
    h.fingerprint = fingerprint;
    channel.send(encode(h), request.data(), request.size());
    // The answer to this request, or none within 100 ms (then ask again: a dropped answer
    // costs a retry, not the run).
    const auto asked = Clock::now();
    Frames frames;
    while (Clock::now() - asked < std::chrono::milliseconds(100)) {
        if (!channel.receive(frames, 100)) break;
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto a = decode(frames.header.data(), frames.header.size(), reason);
        if (!a) throw std::runtime_error("malformed answer from server 0 at " + server0 + ": " + to_string(reason));
        const std::string text(frames.payload.begin(), frames.payload.end());
        if (a->type == MessageType::error) throw std::runtime_error("server 0 at " + server0 + " refused " + what + ": " + text);
        if (a->type != MessageType::servers || a->sequence != sequence) continue;  // an earlier request's answer
        const auto answer = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (answer.is_object() && answer.contains("addresses") && answer["addresses"].is_array()) {
            std::vector<std::string> addresses;
            for (const auto& address : answer["addresses"])
                if (address.is_string()) addresses.push_back(address.get<std::string>());
            if (addresses.size() == answer["addresses"].size() && addresses.size() > server) return addresses;
        }
        if (!answer.is_object() || !answer.contains("missing") || !answer["missing"].is_array())
            throw std::runtime_error("server 0 at " + server0 + " answered where the servers are with: " + text);
        missing.clear();
        for (const auto& k : answer["missing"]) missing += (missing.empty() ? "" : ", ") + k.dump();
        if (under_way) *under_way = answer.value("under_way", false);
        break;
    }
    return std::nullopt;
}

// Every server's address as server 0 lists them, asking again every 100 ms until it knows all.
std::vector<std::string> enter_directory(Channel& channel, const std::string& server0, std::uint64_t fingerprint,
                                         const DirectoryEntry& entry, int timeout_ms) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    const std::string request = directory_request(entry.server, entry.address, entry.initial_hash);
    const std::string what = "where server " + std::to_string(entry.server) + " listens (" + entry.address + ")";
    std::uint64_t sequence = 0;
    std::string missing = "every other";
    while (true) {
        if (auto all = ask_once(channel, server0, fingerprint, request, ++sequence, entry.server, what, missing)) return *all;
        if (Clock::now() >= deadline)
            throw std::runtime_error("server 0 at " + server0 + " did not learn where every server listens within " +
                                     std::to_string(timeout_ms) + " ms (cluster.join_timeout_ms); still missing: the "
                                     "server(s) of rank(s) " + missing + ". Is every rank running, with server_placement "
                                     "\"ranks\"?");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

}  // namespace

std::string join_directory(Transport& transport, const std::string& server0, const TransportOptions& options,
                           std::uint64_t fingerprint, const DirectoryEntry& entry, const std::string& own, int timeout_ms) {
    auto channel = transport.connect(server0, unique_peer_identity("directory"), options);
    std::vector<std::string> all = enter_directory(*channel, server0, fingerprint, entry, timeout_ms);
    channel->abandon();
    // A survivor serves this rank's range (it was lost and restarted): the list says where.
    if (all[entry.server] == entry.address) all[entry.server] = own;
    if (entry.server != 0) all[0] = server0;
    std::string joined;
    for (const std::string& a : all) joined += (joined.empty() ? "" : ",") + a;
    return joined;
}

}  // namespace tether

namespace tether {

std::string moved_server(Channel& channel, const std::string& server0, std::uint64_t fingerprint, std::size_t server,
                         const std::string& lost, std::uint64_t initial_hash, std::uint64_t sequence) {
    std::string missing;
    const auto all = ask_once(channel, server0, fingerprint, directory_request(server, lost, initial_hash, /*lost=*/true),
                              sequence, server, "where server " + std::to_string(server) + "'s range went", missing);
    return all ? (*all)[server] : std::string();
}

std::optional<std::string> come_back(Transport& transport, const std::string& server0, const TransportOptions& options,
                                     std::uint64_t fingerprint, const DirectoryEntry& entry, int wait_ms) {
    using Clock = std::chrono::steady_clock;
    auto channel = transport.connect(server0, unique_peer_identity("directory"), options);
    const std::string request = directory_request(entry.server, entry.address, entry.initial_hash, /*lost=*/true);
    const std::string what = "where server " + std::to_string(entry.server) + "'s range is";
    std::string missing;
    bool under_way = false, said = false;
    int unanswered = 0;
    const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
    for (std::uint64_t sequence = 1;; ++sequence) {
        missing.clear();
        under_way = false;
        const auto all = ask_once(*channel, server0, fingerprint, request, sequence, entry.server, what, missing, &under_way);
        if (all) {  // moved: the list, server 0 where this rank reached it
            channel->abandon();
            std::fprintf(stderr, "rank %zu: this rank was lost and its range is served at %s now; it rejoins the run as "
                         "a worker\n", entry.server, (*all)[entry.server].c_str());
            std::vector<std::string> list = *all;
            list[0] = server0;
            std::string joined;
            for (const std::string& a : list) joined += (joined.empty() ? "" : ",") + a;
            return joined;
        }
        // No answer within 0.5 s (server 0 not up yet), or servers missing: a run starting, not
        // one to come back to.
        if (!under_way && missing.empty() && ++unanswered < 5) continue;
        if (!under_way) {
            channel->abandon();
            return std::nullopt;
        }
        if (!said)
            std::fprintf(stderr, "rank %zu: the run is under way and this rank's server starts afresh (no resume); "
                         "waiting up to %d ms for rank 0 to serve its range from its copy, to rejoin as a worker\n",
                         entry.server, wait_ms);
        said = true;
        if (Clock::now() >= deadline)
            throw std::runtime_error("rank " + std::to_string(entry.server) + " came back to a run under way, but rank 0 at " +
                                     server0 + " did not take its range over within " + std::to_string(wait_ms) +
                                     " ms (cluster.center_restart_ms); restart it with resume (run_dir= and resume=True, "
                                     "tether worker --resume RUN_DIR) to serve its range from its checkpoint");
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

}  // namespace tether
