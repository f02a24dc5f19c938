#include "transport/curve_keys.hpp"

#include <sodium.h>
#include <sys/stat.h>
#include <zmq.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "util/errors.hpp"

namespace tether {

namespace {

std::string trimmed(std::string s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    const auto last = s.find_last_not_of(" \t\r\n");
    return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

void require_sodium() {
    if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised (sodium_init failed)");
}

}  // namespace

bool is_z85_key(const std::string& key) {
    if (key.size() != 40) return false;
    std::uint8_t binary[32];
    return zmq_z85_decode(binary, key.c_str()) != nullptr;
}

bool curve_available() { return zmq_has("curve") != 0; }

CurveKeyPair generate_curve_key_pair() {
    if (!curve_available())
        throw std::runtime_error("this libzmq has no CURVE support (zmq_has(\"curve\") is false); install a libzmq "
                                 "built with libsodium, e.g. Debian's libzmq5");
    char public_key[41] = {}, secret_key[41] = {};
    if (zmq_curve_keypair(public_key, secret_key) != 0)
        throw std::runtime_error(std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno()));
    return {public_key, secret_key};
}

CurveKeyPair derive_curve_key_pair(const std::string& secret, const std::string& role) {
    require_sodium();
    // A seed per role: BLAKE2b-256 over a label, the role and the secret. The label versions the
    // derivation, so a later change cannot silently produce keys an older rank would not.
    const std::string message = std::string("tether-curve-v1") + '\0' + role + '\0' + secret;
    unsigned char seed[crypto_box_SEEDBYTES];
    crypto_generichash(seed, sizeof seed, reinterpret_cast<const unsigned char*>(message.data()), message.size(), nullptr, 0);
    unsigned char public_key[crypto_box_PUBLICKEYBYTES], secret_key[crypto_box_SECRETKEYBYTES];
    crypto_box_seed_keypair(public_key, secret_key, seed);
    sodium_memzero(seed, sizeof seed);
    char public_z85[41] = {}, secret_z85[41] = {};
    zmq_z85_encode(public_z85, public_key, sizeof public_key);
    zmq_z85_encode(secret_z85, secret_key, sizeof secret_key);
    sodium_memzero(secret_key, sizeof secret_key);
    return {public_z85, secret_z85};
}

std::string generate_secret() {
    require_sodium();
    unsigned char bytes[32];
    randombytes_buf(bytes, sizeof bytes);
    char hex[65] = {};
    sodium_bin2hex(hex, sizeof hex, bytes, sizeof bytes);
    sodium_memzero(bytes, sizeof bytes);
    return hex;
}

std::string curve_public_key_of(const std::string& secret_key) {
    char public_key[41] = {};
    if (zmq_curve_public(public_key, secret_key.c_str()) != 0) return "";
    return public_key;
}

std::string read_curve_key(const std::string& path, const std::string& config_key) {
    if (is_z85_key(path)) return path;  // the key itself
    std::ifstream in(path);
    if (!in) throw ConfigError(config_key + ": cannot read the key file \"" + path + "\" (tether keygen --out PREFIX writes one)");
    std::string line, key;
    while (std::getline(in, line)) {
        line = trimmed(line);
        if (!line.empty() && line[0] != '#') {
            key = line;
            break;
        }
    }
    if (!is_z85_key(key))
        throw ConfigError(config_key + ": \"" + path + "\" does not hold a Z85 CURVE key (40 characters), as tether keygen writes");
    return key;
}

std::set<std::string> read_curve_allowlist(const std::string& path, const std::string& config_key) {
    std::set<std::string> keys;
    if (is_z85_key(path.substr(0, path.find(',')))) {  // the keys themselves
        std::size_t start = 0;
        while (start <= path.size()) {
            const std::size_t comma = std::min(path.find(',', start), path.size());
            const std::string key = trimmed(path.substr(start, comma - start));
            if (!is_z85_key(key))
                throw ConfigError(config_key + ": \"" + key + "\" is not a Z85 public key (40 characters); give keys "
                                  "separated by ',', or a file of one key per line");
            keys.insert(key);
            start = comma + 1;
        }
        return keys;
    }
    std::ifstream in(path);
    if (!in) throw ConfigError(config_key + ": cannot read the allowlist \"" + path + "\"");
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        line = trimmed(line);
        if (line.empty() || line[0] == '#') continue;
        if (!is_z85_key(line))
            throw ConfigError(config_key + ": \"" + path + "\" line " + std::to_string(number) +
                              ": not a Z85 public key (40 characters)");
        keys.insert(line);
    }
    if (keys.empty()) throw ConfigError(config_key + ": \"" + path + "\" lists no public key; no worker could join");
    return keys;
}

void write_curve_key_pair(const std::string& prefix, const CurveKeyPair& pair) {
    auto write = [](const std::string& path, const std::string& text, mode_t mode) {
        {
            std::ofstream out(path, std::ios::trunc);
            out << text << "\n";
            if (!out) throw std::runtime_error("cannot write " + path);
        }
        ::chmod(path.c_str(), mode);
    };
    // The secret first, made private before it holds anything worth reading.
    {
        std::ofstream touch(prefix + ".key", std::ios::trunc);
        if (!touch) throw std::runtime_error("cannot write " + prefix + ".key");
    }
    ::chmod((prefix + ".key").c_str(), 0600);
    write(prefix + ".key", "# tether CURVE secret key: keep it private\n" + pair.secret_key, 0600);
    write(prefix + ".pub", "# tether CURVE public key\n" + pair.public_key, 0644);
}

}  // namespace tether
