// CURVE key pairs as `tether keygen` writes them and the security.* config keys name them:
// one Z85 key (40 characters) per file, or the key itself where a setting gives it inline. Pairs
// made at random (zmq_curve_keypair) or derived from a shared secret (libsodium's
// crypto_box_seed_keypair), so that the ranks of a launcher job compute the same keys.
#pragma once

#include <set>
#include <string>

namespace tether {

struct CurveKeyPair {
    std::string public_key, secret_key;  // Z85
};

// Whether this libzmq was built with CURVE (libsodium); keygen and security.* need it.
bool curve_available();
CurveKeyPair generate_curve_key_pair();
// The pair of `role` ("center", "worker") derived from `secret`: every process that holds the
// secret computes the same pair, and the pairs of two roles are unrelated.
CurveKeyPair derive_curve_key_pair(const std::string& secret, const std::string& role);
// A new random secret for derive_curve_key_pair: 64 hexadecimal digits (256 bits).
std::string generate_secret();
// Whether `text` is one Z85 key (40 characters that decode to 32 bytes).
bool is_z85_key(const std::string& text);
// The public key that belongs to `secret_key` (both Z85), to check a configured pair.
std::string curve_public_key_of(const std::string& secret_key);

// A key setting's value: the Z85 key itself (40 characters), or a key file to read. Throws
// ConfigError naming `config_key`, the file and what is wrong.
std::string read_curve_key(const std::string& value, const std::string& config_key);
// An allowlist setting's value: Z85 public keys separated by ',', or a file of one per line
// ('#' comments and blank lines skipped).
std::set<std::string> read_curve_allowlist(const std::string& value, const std::string& config_key);
// Writes PREFIX.pub (0644) and PREFIX.key (0600); throws std::runtime_error on failure.
void write_curve_key_pair(const std::string& prefix, const CurveKeyPair& pair);

}  // namespace tether
