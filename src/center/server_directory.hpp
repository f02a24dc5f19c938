// Where the servers of a run are, when every rank hosts one (cluster.server_placement "ranks"):
// server k listens on rank k's host, which only rank k knows (torchrun, srun and mpirun name
// rank 0's host, not the others'). Server 0 keeps this directory: each rank tells it where its
// server listens (a `servers` message, protocol/header.hpp), and is answered with every
// server's address once all have told it, so that a worker connects to all of them and server 0
// fetches their ranges to evaluate x~. Each rank also says which x~(0) it starts its range from
// (a hash of its whole initial vector): x~(0) is rank 0's, and a rank whose model starts
// elsewhere (another seed) would put another model's range into x~ and is refused, naming both.
//
// Written by server 0's serve loop, read by its evaluation thread: one mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tether {

class ServerDirectory {
public:
    // `servers`: S; `initial_hash`: server 0's own x~(0) (initial_vector_hash below).
    ServerDirectory(std::size_t servers, std::uint64_t initial_hash);

    struct Answer {
        std::string error;                   // a refusal, for the asker; empty otherwise
        std::vector<std::string> addresses;  // every server's, once all are known
        std::vector<std::size_t> missing;    // the servers not heard from yet
        bool under_way = false;              // where(): every server known, k's range not moved yet
    };
    // Server k is at `address` and starts from the x~(0) of `initial_hash`. A server may
    // register again (its rank restarted); until every server is known its newest address
    // holds, and after that only the same address is taken (the ranks hold the list).
    Answer enter(std::size_t server, const std::string& address, std::uint64_t initial_hash);
    // A worker lost server k at `lost`: every server's address once k's range has moved from
    // there (a survivor took it over: moved()), else missing = {k} and under_way (ask again);
    // before every server is known, the servers missing (a rank starting, not coming back).
    Answer where(std::size_t server, const std::string& lost);
    // A copy of a complete directory's list (rank 1's, api/rank_server.hpp): it answers where()
    // and move() as the original does, and refuses enter(): a rank tells server 0 where it is.
    void copy(const std::vector<std::string>& addresses);
    // Server k's range is served at `address` now (its rank was lost; rank 0 took it over).
    // A restarted rank k entering again is answered with the list as it is: it rejoins as a
    // worker, and its own server has no range to serve.
    void move(std::size_t server, const std::string& address);
    // Called (on server 0's thread, the directory unlocked) when where() answers under_way: a
    // worker lost server k and its range has not moved. Set from rank 0's worker once it
    // finished (api/rank_takeover.cpp), from any thread; it may move() the range. Empty: none.
    void set_on_under_way(std::function<void(std::size_t server)> hook);
    // Whether server k registered within the last `window`: its rank is back, starting again.
    bool entered_within(std::size_t server, std::chrono::milliseconds window) const;
    // Every server's address; waits for the last to register up to `timeout`, then throws
    // std::runtime_error naming the servers still missing.
    std::vector<std::string> addresses(std::chrono::milliseconds timeout) const;
    // As addresses(), without server 0's: the servers whose ranges server 0 fetches.
    std::vector<std::string> others(std::chrono::milliseconds timeout) const {
        const std::vector<std::string> all = addresses(timeout);
        return {all.begin() + 1, all.end()};
    }
    std::size_t size() const { return addresses_.size(); }

private:
    std::vector<std::size_t> missing_locked() const;
    Answer where_locked(std::size_t server, const std::string& lost) const;  // locks the mutex itself

    const std::uint64_t initial_hash_;
    mutable std::mutex mutex_;
    mutable std::condition_variable complete_;
    std::vector<std::string> addresses_;  // "" until server k registers
    std::vector<bool> moved_;             // server k's range taken over (move())
    bool copy_ = false;                   // copy(): no entries of its own
    std::function<void(std::size_t)> on_under_way_;
    std::vector<std::chrono::steady_clock::time_point> entered_;  // when server k last registered
};

// A hash of x~(0) that every rank computes alike from the same floats (FNV-1a over the bytes).
std::uint64_t initial_vector_hash(const float* x, std::size_t count);

// The request a rank sends and the answer it gets (UTF-8 JSON payloads of `servers` messages):
// {"server": k, "address": "tcp://HOST:PORT", "initial": "<hash, 16 hex digits>"} and
// {"addresses": [...]} or {"missing": [k, ...]}; a worker asking where a lost server's range
// went adds "lost": true (its address is the one lost). Parsing throws std::runtime_error
// naming what is wrong.
std::string directory_request(std::size_t server, const std::string& address, std::uint64_t initial_hash,
                              bool lost = false);
struct DirectoryRequest {
    std::size_t server = 0;
    std::string address;
    std::uint64_t initial_hash = 0;
    bool lost = false;
};
DirectoryRequest parse_directory_request(const std::string& text, std::size_t servers);
std::string directory_answer(const ServerDirectory::Answer& answer);

}  // namespace tether
