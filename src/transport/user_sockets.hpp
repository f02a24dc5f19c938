// Sockets only this user can reach, for runs whose processes all live on one host.
//
// A local run's center and worker processes need no encryption between them: nothing leaves
// the kernel. What they need is that nobody else on the host can connect. An ipc:// socket in a
// folder of mode 0700 gives exactly that (the kernel checks the folder's permission on
// connect), where tcp://127.0.0.1 is open to every user and needs CURVE, whose XSalsa20-Poly1305
// costs about 0.7 ms per megabyte each way on a 2-core VM (docs/architecture.md#security).
#pragma once

#include <string>

namespace tether {

// A fresh folder of mode 0700 for a run's ipc:// sockets (mkdtemp in $XDG_RUNTIME_DIR when it
// is set, else /tmp, so the paths stay under the ~107 bytes a socket path may hold), removed
// with everything in it when this object goes.
class UserSocketFolder {
public:
    UserSocketFolder();
    ~UserSocketFolder();
    UserSocketFolder(const UserSocketFolder&) = delete;
    UserSocketFolder& operator=(const UserSocketFolder&) = delete;

    // ipc://FOLDER/server-K: server K's address.
    std::string address(int server) const;
    const std::string& folder() const { return folder_; }

private:
    std::string folder_;
};

// True when only this process's user can connect to `address`: inproc:// (this process), or an
// ipc:// socket whose folder belongs to this user and lets nobody else in (mode & 077 == 0).
bool user_only_address(const std::string& address);

}  // namespace tether
