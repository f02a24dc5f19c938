#include "record/provenance.hpp"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <string>

#include "build_commit.hpp"

namespace tether {

namespace {

// The process's own argv, as the kernel kept it (NUL-separated), joined with spaces.
std::string command_line() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!raw.empty() && raw.back() == '\0') raw.pop_back();
    for (char& c : raw)
        if (c == '\0') c = ' ';
    return raw;
}

}  // namespace

nlohmann::json current_provenance() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    return {{"tether_version", TETHER_VERSION},
            {"commit", TETHER_BUILD_COMMIT},
            {"host", host},
            {"command_line", command_line()},
            {"start_time", stamp},
            {"pid", ::getpid()}};
}

}  // namespace tether
