// Server 0's word, as the other servers of a sharded center (cluster.servers > 1) check it:
// server 0 alone assigns worker ids, and a server k > 0 takes a worker id only with a token
// server 0 made for it (carried by the worker from server 0's welcome to its hello to server k);
// a server waiting for the final x~ request leaves only on one that carries server 0's token.
//
// A token is the run nonce (8 bytes, drawn by server 0 when it starts) and an HMAC (libsodium's
// crypto_auth, HMAC-SHA-512-256, cut to 16 bytes) of what it vouches for and that nonce, under a
// key every server of the run holds and no worker does: the servers of one process share a
// random key in memory; servers in several processes derive it from the center's CURVE secret
// key, which they all hold. Without CURVE, servers in several processes share no secret: they
// check nothing (center/center_settings.cpp warns when they start).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tether {

constexpr std::size_t kServerTokenBytes = 24;  // nonce 8 + MAC 16

// Where a hello's agreed settings start in its payload (`bytes` long): after the token that a
// hello with kFlagToken (protocol/header.hpp) opens with.
std::size_t hello_settings_offset(std::uint32_t flags, std::size_t bytes);

class ServerTokens {
public:
    static constexpr std::size_t kKeyBytes = 32;
    using Key = std::array<std::uint8_t, kKeyBytes>;

    // A random key: the servers of one process, which share this object.
    static std::shared_ptr<const ServerTokens> random();
    // The key every holder of the center's CURVE secret key (Z85) derives alike.
    static std::shared_ptr<const ServerTokens> from_center_secret(const std::string& center_secret_key);
    ServerTokens(const Key& key, std::uint64_t nonce);

    // Server 0: the token a worker of id `worker_id` shows the other servers.
    std::string for_worker(std::uint32_t worker_id) const;
    // Server 0: the token of its request (of `sequence`) for the final x~.
    std::string for_final(std::uint64_t sequence) const;
    // Servers k > 0: whether `token` (`bytes` long) is server 0's for that id, or that request.
    bool admits_worker(std::uint32_t worker_id, const std::uint8_t* token, std::size_t bytes) const;
    bool admits_final(std::uint64_t sequence, const std::uint8_t* token, std::size_t bytes) const;

private:
    std::string make(std::uint8_t purpose, std::uint64_t value, std::uint64_t nonce) const;
    bool admits(std::uint8_t purpose, std::uint64_t value, const std::uint8_t* token, std::size_t bytes) const;

    Key key_;
    std::uint64_t nonce_;
};

}  // namespace tether
