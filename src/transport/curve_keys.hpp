// CURVE key pairs as `tether keygen` writes them and the security.* config keys name them:
// one Z85 key (40 characters) per file.
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
// The public key that belongs to `secret_key` (both Z85), to check a configured pair.
std::string curve_public_key_of(const std::string& secret_key);

// Reads a key file; throws ConfigError naming `config_key`, the file and what is wrong.
std::string read_curve_key(const std::string& path, const std::string& config_key);
// One Z85 public key per line; '#' comments and blank lines skipped.
std::set<std::string> read_curve_allowlist(const std::string& path, const std::string& config_key);
// Writes PREFIX.pub (0644) and PREFIX.key (0600); throws std::runtime_error on failure.
void write_curve_key_pair(const std::string& prefix, const CurveKeyPair& pair);

}  // namespace tether
