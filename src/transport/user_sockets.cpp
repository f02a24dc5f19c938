#include "transport/user_sockets.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace tether {

UserSocketFolder::UserSocketFolder() {
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    std::string base = runtime && *runtime ? runtime : "/tmp";
    std::string pattern = base + "/tether-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (!::mkdtemp(name.data()))  // mkdtemp makes it 0700
        throw std::runtime_error("cannot make a folder for the run's sockets in " + base + ": " + std::strerror(errno) +
                                 " (set XDG_RUNTIME_DIR to a writable folder, or give cluster.endpoint)");
    folder_ = name.data();
}

UserSocketFolder::~UserSocketFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
}

std::string UserSocketFolder::address(int server) const { return "ipc://" + folder_ + "/server-" + std::to_string(server); }

bool user_only_address(const std::string& address) {
    if (address.rfind("inproc://", 0) == 0) return true;
    if (address.rfind("ipc://", 0) != 0) return false;
    const std::string path = address.substr(6);
    const std::string::size_type slash = path.rfind('/');
    if (slash == std::string::npos || path[0] != '/') return false;  // relative: its folder is wherever we run
    struct stat st {};
    const std::string folder = slash == 0 ? "/" : path.substr(0, slash);
    return ::lstat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid() && (st.st_mode & 077) == 0;
}

}  // namespace tether
