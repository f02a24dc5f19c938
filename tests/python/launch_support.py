"""What the tests of launched ranks share: torchrun's variables for one rank on one host (set by
the tests themselves: Debian's torchrun does not run on Python 3.11), a free port, and the ranks'
printed results."""
import json
import os
import socket

LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                      "TETHER_PORT", "TETHER_CENTER", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                      "TETHER_SECRET", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "TORCHELASTIC_RESTART_COUNT",
                      "SLURM_RESTART_COUNT")
# As a job script exports it: TETHER_SECRET=$(tether keygen --secret) (64 hexadecimal digits).
SECRET = "5e" * 32


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(count):
    """A port whose next count - 1 are free too (rank k's server listens at port + k)."""
    while True:
        port = free_port()
        try:
            sockets = []
            for k in range(count + 1):  # and the one before: torchrun's store, MASTER_PORT
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port - 1 + k))
            return port
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()


def torchrun_env(rank, world, port, local_world=None, secret=SECRET, **more):
    """What torchrun sets for one rank on one host (the center then listens at MASTER_PORT + 1),
    and the job's TETHER_SECRET unless secret=None."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(local_world or world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port - 1), **more)
    if secret is not None:
        env["TETHER_SECRET"] = secret
    return env


def results(processes, timeout=120):
    out = []
    for p in processes:
        stdout, stderr = p.communicate(timeout=timeout)
        lines = stdout.strip().splitlines()
        assert lines, f"rank exited {p.returncode} printing nothing; stderr: {stderr[-2000:]}"
        out.append((p.returncode, json.loads(lines[-1]), stderr))
    return out
