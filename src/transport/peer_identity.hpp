// The ZeroMQ routing identity of a worker's socket. The center's ROUTER tells workers apart by
// it alone, so it must be unique across every host of a run: two workers with the same one
// would have their messages crossed. It names the role, the host, the process and a
// per-process counter, plus a random number for hosts that share a name (containers).
#pragma once

#include <string>

namespace tether {

// E.g. "worker-node7-12345-0-2718281828". At most 255 bytes (ZeroMQ's limit).
std::string unique_peer_identity(const std::string& role);
// What every identity unique_peer_identity(role) gives in process `pid` of this host starts
// with ("worker-node7-12345-"): a parent that started the process finds its peers by it.
std::string peer_identity_prefix(const std::string& role, long pid);

}  // namespace tether
