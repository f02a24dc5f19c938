#include "transport/peer_identity.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>

namespace tether {

std::string peer_identity_prefix(const std::string& role, long pid) {
    char host[65] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "host");
    return role + "-" + host + "-" + std::to_string(pid) + "-";
}

std::string unique_peer_identity(const std::string& role) {
    static std::atomic<unsigned> counter{0};
    std::string identity = peer_identity_prefix(role, long(::getpid())) + std::to_string(counter++) + "-" +
                           std::to_string(std::random_device{}());
    if (identity.size() > 255) identity.resize(255);
    return identity;
}

}  // namespace tether
