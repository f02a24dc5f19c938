// CURVE keys for the runs tether starts itself (docs/architecture.md#security). Where tether
// starts the processes it can hand them keys, so a stranger on the host cannot join: a local
// run writes fresh pairs into its run directory, an embedded run over tcp:// holds them in
// memory, and the ranks of a launcher job derive the same pairs from one shared secret. Keys
// the user gives (security.*) always win, and security.insecure asks for none; the callers
// (run/distributed_run.cpp, cli/cluster_commands.cpp) decide when these apply.
#pragma once

#include <string>

#include <tether/cluster_options.hpp>
#include <tether/curve_keys.hpp>

namespace tether {

// Fresh pairs for the center and for the workers (all workers share one), as the key values
// themselves: for a run whose workers are threads of this process.
CurveKeys fresh_run_keys();

// Fresh pairs written into DIRECTORY/keys/ (the folder mode 0700, secret keys 0600; the workers'
// public key file is the allowlist), named by the settings returned: the workers of a local run
// find the paths in the run's config.json, and `--resume` uses the same keys.
CurveKeys write_run_keys(const std::string& directory);

// The pairs every holder of `secret` derives alike (transport/curve_keys.hpp); the secret must
// hold at least 32 characters (`tether keygen --secret` prints 64 hexadecimal digits).
// `source` names where it came from in errors ("TETHER_SECRET").
CurveKeys keys_from_secret(const std::string& secret, const std::string& source);

// What a rank of a launcher job knows that the shared secret depends on.
struct LauncherKeyRequest {
    int rank = 0;
    std::string job_id;     // the launcher's id of this job (SLURM_JOB_ID, ...); "" when none is known
    std::string directory;  // user-only and seen by every rank; "" = ~/.tether
    int timeout_ms = int(ClusterOptions{}.join_timeout_ms);  // how long a rank > 0 waits for rank 0's secret
};

// The keys of a launcher job's ranks. The secret comes from the TETHER_SECRET environment
// variable (launchers pass the environment on), else from DIRECTORY/run-<job id>/secret, which
// rank 0 writes (the folders 0700, the file 0600) and the other ranks read within timeout_ms
// (a file older than that is another job's); else a ConfigError says how to set TETHER_SECRET,
// or security.insecure.
CurveKeys launcher_keys(const LauncherKeyRequest& request);
// Rank 0, once its run is over: removes the secret it wrote (nothing when TETHER_SECRET gave it).
void remove_launcher_secret(const LauncherKeyRequest& request);

}  // namespace tether
