// A launcher's environment read once (tether::Launcher, <tether/tether.hpp>): which launcher
// started this process, its rank among how many, its place on its host, and where rank 0's
// center listens. The one reader: the CLI's `tether worker`, the runs that place a worker on a
// GPU and Python's Worker.from_env all take these values from here.
//
// Which launcher wins when several have set their variables (a launcher inside another's job):
//   1. torchrun   RANK and WORLD_SIZE (torchrun under srun or mpirun: its own ranks are the ones)
//   2. openmpi    OMPI_COMM_WORLD_RANK (mpirun inside a Slurm job sees SLURM_PROCID of the batch step)
//   3. pmi        PMIX_RANK or PMI_RANK, with PMI_SIZE (MPICH's, Intel MPI's mpiexec; also inside Slurm)
//   4. slurm      SLURM_PROCID (srun)
// The center's host: TETHER_CENTER's, else MASTER_ADDR, else the first host of Slurm's node list
// (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST: also under mpirun inside a Slurm job), else
// none. Its port: TETHER_CENTER's, else TETHER_PORT, else MASTER_PORT + 1 (torchrun's own store
// listens at MASTER_PORT), else kDefaultCenterPort.
#pragma once

#include <tether/tether.hpp>

#include <functional>
#include <optional>
#include <string>

namespace tether {

// torchrun's default MASTER_PORT (29500) + 1, so that a job without any port variable and a
// torchrun job with the default agree.
constexpr int kDefaultCenterPort = 29501;

// A variable's value, or null when it is not set.
using Environment = std::function<const char*(const char* name)>;

// read_launcher() over `environment` (the process's own in read_launcher()).
std::optional<Launcher> read_launcher(const Environment& environment);

// The first host of a Slurm node list in its compressed form: "node[01-04,07],gpu3" -> "node01",
// "rack[2-3]-n[8-9]" -> "rack2-n8". Throws ConfigError naming `variable` for a malformed list.
std::string first_slurm_host(const std::string& nodelist, const std::string& variable);

// Tasks on node `node` from SLURM_TASKS_PER_NODE's form "2(x3),1" (2, 2, 2, 1), or 0 when the
// list is malformed or shorter.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node);

// True for "NAME=value" entries of a variable that makes a process a launcher's rank: a child
// that tether starts itself (a local run's workers) must not inherit them.
bool is_launcher_rank_variable(const std::string& entry);

}  // namespace tether
