// with_launcher_keys (include/tether/tether.hpp): the launcher ranks' keys of cluster/run_keys.hpp
// for the embedding API and Python.
#include <tether/tether.hpp>

#include "cluster/run_keys.hpp"

namespace tether {

ServiceOptions with_launcher_keys(ServiceOptions o, int rank, const std::string& job_id, const std::string& directory) {
    if (o.insecure || !o.center_public_key.empty()) return o;
    o.curve_keys() = launcher_keys({rank, job_id, directory, int(o.join_timeout_ms)});
    return o;
}

void remove_launcher_secret(int rank, const std::string& job_id, const std::string& directory) {
    remove_launcher_secret(LauncherKeyRequest{rank, job_id, directory});
}

}  // namespace tether
