#include "center/server_tokens.hpp"

#include <sodium.h>

#include <cstring>
#include <stdexcept>

#include "protocol/header.hpp"

namespace tether {

namespace {

// What a token vouches for: a worker id, or a request for the final x~ (never one for the other).
constexpr std::uint8_t kWorkerPurpose = 'w', kFinalPurpose = 'f';
constexpr std::size_t kNonceBytes = 8, kMacBytes = kServerTokenBytes - kNonceBytes;
static_assert(ServerTokens::kKeyBytes == crypto_auth_KEYBYTES, "a token key is a crypto_auth key");
static_assert(kMacBytes <= crypto_auth_BYTES, "a token holds a cut MAC");

void require_sodium() {
    if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised (sodium_init failed)");
}

void put_u64(std::uint8_t* out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = std::uint8_t(v >> (8 * i));
}

std::uint64_t get_u64(const std::uint8_t* in) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t(in[i]) << (8 * i);
    return v;
}

std::uint64_t random_nonce() {
    std::uint64_t nonce = 0;
    randombytes_buf(&nonce, sizeof nonce);
    return nonce;
}

}  // namespace

std::size_t hello_settings_offset(std::uint32_t flags, std::size_t bytes) {
    return (flags & kFlagToken) && bytes >= kServerTokenBytes ? kServerTokenBytes : 0;
}

std::shared_ptr<const ServerTokens> ServerTokens::random() {
    require_sodium();
    Key key;
    randombytes_buf(key.data(), key.size());
    return std::make_shared<const ServerTokens>(key, random_nonce());
}

std::shared_ptr<const ServerTokens> ServerTokens::from_center_secret(const std::string& center_secret_key) {
    require_sodium();
    // BLAKE2b-256 over a label and the secret: the label keeps this key apart from anything else
    // derived from the same secret, and versions the derivation.
    const std::string message = std::string("tether-server-tokens-v1") + '\0' + center_secret_key;
    Key key;
    crypto_generichash(key.data(), key.size(), reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                       nullptr, 0);
    return std::make_shared<const ServerTokens>(key, random_nonce());
}

ServerTokens::ServerTokens(const Key& key, std::uint64_t nonce) : key_(key), nonce_(nonce) {}

std::string ServerTokens::make(std::uint8_t purpose, std::uint64_t value, std::uint64_t nonce) const {
    std::uint8_t message[1 + 8 + kNonceBytes];
    message[0] = purpose;
    put_u64(message + 1, value);
    put_u64(message + 9, nonce);
    unsigned char mac[crypto_auth_BYTES];
    crypto_auth(mac, message, sizeof message, key_.data());
    std::string token(kServerTokenBytes, '\0');
    put_u64(reinterpret_cast<std::uint8_t*>(&token[0]), nonce);
    std::memcpy(&token[kNonceBytes], mac, kMacBytes);
    return token;
}

bool ServerTokens::admits(std::uint8_t purpose, std::uint64_t value, const std::uint8_t* token, std::size_t bytes) const {
    if (!token || bytes != kServerTokenBytes) return false;
    const std::string expected = make(purpose, value, get_u64(token));
    // In constant time: a peer learns nothing from how long a refusal took.
    return sodium_memcmp(expected.data() + kNonceBytes, token + kNonceBytes, kMacBytes) == 0;
}

std::string ServerTokens::for_worker(std::uint32_t worker_id) const { return make(kWorkerPurpose, worker_id, nonce_); }

std::string ServerTokens::for_final(std::uint64_t sequence) const { return make(kFinalPurpose, sequence, nonce_); }

bool ServerTokens::admits_worker(std::uint32_t worker_id, const std::uint8_t* token, std::size_t bytes) const {
    return admits(kWorkerPurpose, worker_id, token, bytes);
}

bool ServerTokens::admits_final(std::uint64_t sequence, const std::uint8_t* token, std::size_t bytes) const {
    return admits(kFinalPurpose, sequence, token, bytes);
}

}  // namespace tether
