#include "sweep/sweep_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tether {

SweepLock::SweepLock(const std::string& directory) {
    const std::string path = directory + "/sweep.lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error(path + ": cannot open the sweep lock: " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        char holder[32] = {};
        const ssize_t got = ::pread(fd_, holder, sizeof holder - 1, 0);
        ::close(fd_);
        fd_ = -1;
        throw std::runtime_error(directory + " is in use by another tether sweep" +
                                 (got > 0 ? " (pid " + std::string(holder, std::size_t(got)) + ")" : std::string()) +
                                 "; wait for it to finish, or give this one another --out");
    }
    const std::string pid = std::to_string(::getpid());
    if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

SweepLock::~SweepLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace tether
