#include "run/center_security.hpp"

#include <cstdio>

#include "transport/curve_keys.hpp"
#include "util/errors.hpp"

namespace tether {

namespace {

bool is_loopback(const std::string& address) {
    if (address.rfind("tcp://", 0) != 0) return true;  // inproc:// and ipc:// stay on this host
    const std::string host = address.substr(6, address.rfind(':') - 6);
    return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]" || host == "::1";
}

}  // namespace

void secure_center(const RunConfig& config, const std::vector<std::string>& addresses, Transport& transport,
                   TransportOptions& options) {
    const SecurityConfig& sec = config.security;
    if (!sec.enabled()) {
        for (const std::string& address : addresses)
            if (!is_loopback(address))
                std::fprintf(stderr,
                             "tether: WARNING: the center binds %s without security: anyone who can reach it can join and "
                             "move x~. Set security.* (tether keygen; see docs/architecture.md#security)\n",
                             address.c_str());
        return;
    }
    bool all_inproc = true;  // one process: nothing to authenticate
    for (const std::string& address : addresses) all_inproc = all_inproc && address.rfind("inproc://", 0) == 0;
    if (all_inproc) return;
    if (!curve_available()) throw ConfigError("security.center_public_key: set, but this libzmq has no CURVE support");
    if (sec.center_secret_key.empty())
        throw ConfigError("security.center_secret_key: the center needs its secret key file (tether keygen writes one)");
    if (sec.authorized_workers.empty())
        throw ConfigError("security.authorized_workers: the center needs the file of allowed worker public keys");
    const std::string secret = read_curve_key(sec.center_secret_key, "security.center_secret_key");
    const std::string expected = read_curve_key(sec.center_public_key, "security.center_public_key");
    if (curve_public_key_of(secret) != expected)
        throw ConfigError("security.center_secret_key: \"" + sec.center_secret_key + "\" is not the secret key of the public key in \"" +
                          sec.center_public_key + "\" (security.center_public_key)");
    transport.require_authentication(read_curve_allowlist(sec.authorized_workers, "security.authorized_workers"));
    options.curve_server_secret = secret;
}

void secure_client(const RunConfig& config, const std::string& address, TransportOptions& options) {
    const SecurityConfig& sec = config.security;
    if (!sec.enabled() || address.rfind("inproc://", 0) == 0) return;
    if (sec.worker_public_key.empty() || sec.worker_secret_key.empty())
        throw ConfigError("security.worker_public_key / security.worker_secret_key: a worker (and server 0 fetching other "
                          "servers' ranges) needs its own key pair when security.center_public_key is set (tether keygen "
                          "writes one)");
    options.curve_server_public = read_curve_key(sec.center_public_key, "security.center_public_key");
    options.curve_client_public = read_curve_key(sec.worker_public_key, "security.worker_public_key");
    options.curve_client_secret = read_curve_key(sec.worker_secret_key, "security.worker_secret_key");
}

}  // namespace tether
