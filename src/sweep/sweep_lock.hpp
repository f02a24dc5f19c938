// One sweep per directory at a time: two sweeps writing the same run directories would each
// take the other's half-written runs for their own. An advisory lock (flock) on
// DIR/sweep.lock, held for the sweep's lifetime and released by the kernel even when the
// process dies, so a crashed sweep never leaves a stale lock behind.
#pragma once

#include <string>

namespace tether {

class SweepLock {
public:
    // Throws std::runtime_error naming the directory and the holder's pid when another sweep
    // holds it.
    explicit SweepLock(const std::string& directory);
    ~SweepLock();
    SweepLock(const SweepLock&) = delete;
    SweepLock& operator=(const SweepLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace tether
