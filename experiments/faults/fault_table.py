#!/usr/bin/python3
"""What a fault costs a PyTorch job of 4 ranks on this host (127.0.0.1), as a user meets it:
fault_rank.py's loop under torchrun's variables (set here), with run_dir and its optimizer
registered. Each cell kills one rank (or every rank) with SIGKILL 3 s into training and maybe
starts it again, as a supervisor (one rank, the same command; resume=True for a rank that hosts a
server; "fresh": the same command without resume=True) or torchrun --max-restarts (every rank, TORCHELASTIC_RESTART_COUNT=1) would. Prints,
per cell: whether the job finished (every process that was left exited 0), each process's exit
code, the longest stall of the survivors (the longest time between two of their progress lines
once the fault struck), the work lost (samples the ranks trained that the center does not
count), and the wall time.

    PYTHONPATH=build/python /usr/bin/python3 experiments/faults/fault_table.py [--only CELL ...] [--csv FILE]
"""
import argparse
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RANK = str(Path(__file__).with_name("fault_rank.py"))
WORLD, STEPS, BATCH, KILL_AT = 4, 2000, 16, 3.0
STRATEGIES = {"center": {"name": "adag", "communication_window": 5},
              "ranks": {"name": "diloco", "communication_window": 10}}
# name: (placement, rank killed ("all": every rank), restart: None, "rank", "fresh" (the rank
# alone, without resume=True: the same command and nothing more) or "job", seconds
# before it[, "standby": rank 1 a standby center])
CELLS = {
    "center_none_standby": ("center", None, None, 0, "standby"),
    "center_rank0_standby": ("center", 0, None, 0, "standby"),
    "center_none": ("center", None, None, 0),
    "center_rank2": ("center", 2, None, 0),
    "center_rank2_back": ("center", 2, "rank", 2),
    "center_rank0": ("center", 0, None, 0),
    "center_rank0_back": ("center", 0, "rank", 2),
    "center_job_back": ("center", "all", "job", 1),
    "ranks_none": ("ranks", None, None, 0),
    "ranks_rank0": ("ranks", 0, None, 0),
    "ranks_rank2": ("ranks", 2, None, 0),
    "ranks_rank2_back": ("ranks", 2, "rank", 2),
    "ranks_rank2_back_late": ("ranks", 2, "rank", 5),
    "ranks_rank2_fresh": ("ranks", 2, "fresh", 2),
    "ranks_job_back": ("ranks", "all", "job", 1),
}


def free_ports(count):
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        sockets = []
        try:
            for k in range(count + 1):
                sockets.append(socket.socket())
                sockets[-1].bind(("127.0.0.1", port - 1 + k))
            return port
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()


class Rank:
    """One process of a rank, its progress lines read as they come."""

    def __init__(self, rank, run, port, placement, attempt, resume=False, standby=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "SLURM", "OMPI", "PMI"))}
        env.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(WORLD),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port - 1), TETHER_SECRET="7a" * 32,
                   TORCHELASTIC_RUN_ID="faults", TORCHELASTIC_RESTART_COUNT=str(attempt))
        strategy = json.dumps(STRATEGIES[placement]) if rank == 0 else "-"
        self.rank, self.lines, self.stderr = rank, [], ""
        self.process = subprocess.Popen([sys.executable, RANK, run, str(STEPS), placement, strategy] +
                                        (["resume"] if resume else []) + ([f"standby={standby}"] if standby else []),
                                        env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def _read_err(self):
        self.stderr = self.process.stderr.read()

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def steps(self):
        return max([l.get("step", 0) for l in self.lines] + [l.get("done", 0) for l in self.lines] + [0])


def run_cell(name):
    placement, victim, restart, delay, *more = CELLS[name]
    run = tempfile.mkdtemp(prefix=f"tether-fault-{name}-")
    port = free_ports(WORLD)
    standby = f"tcp://127.0.0.1:{free_ports(1)}" if "standby" in more else None
    started = time.time()
    ranks = [Rank(r, run, port, placement, 0, standby=standby) for r in range(WORLD)]
    # 3 s after rank 0 began training, the fault.
    while not any("step" in l for l in ranks[0].lines) and time.time() - started < 60:
        time.sleep(0.02)
    time.sleep(KILL_AT)
    struck = time.time()
    killed = [] if victim is None else ranks if victim == "all" else [ranks[victim]]
    lost_steps = 0
    for k in killed:
        k.kill()
        lost_steps += k.steps()  # trained by the killed process (what of it the center kept is counted below)
    processes = [r for r in ranks if r not in killed]
    if restart:
        time.sleep(delay)
        again = [Rank(k.rank, run, port, placement, 1 if restart == "job" else 0,
                      resume=restart == "rank" and (placement == "ranks" or k.rank == 0), standby=standby) for k in killed]
        processes += again
    deadline = time.time() + 180
    exits = {}
    for p in processes:
        try:
            p.process.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
        exits[id(p)] = time.time()  # within the wait's resolution of the others' exits
        p.reader.join(timeout=5)
    ended = time.time()
    codes = {p.rank: p.process.returncode for p in processes}
    # Survivors: processes of the first attempt never killed; their longest silence after the fault.
    stall = 0.0
    for p in ranks:
        if p in killed:
            continue
        # Until its last line, or its exit when it ended without one (it failed after waiting).
        times = [struck] + [l["t"] for l in p.lines if l["t"] >= struck and ("step" in l or "done" in l)]
        if not any("done" in l for l in p.lines):
            times.append(exits[id(p)])
        stall = max([stall] + [b - a for a, b in zip(times, times[1:])])
    trained = sum(p.steps() - (p.lines[0].get("start_step", 0) if p.lines else 0) for p in processes) + lost_steps
    summary_path = Path(run, "summary.json")
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    counted = summary.get("samples")
    ended_run = [l for p in processes for l in p.lines if "bytes_sent" in l]  # the rank whose center ended the run
    row = {"cell": name, "placement": placement + (" + standby" if standby else ""),
           "center_bytes_sent": ended_run[0]["bytes_sent"] if ended_run else None, "killed": "none" if victim is None else victim,
           "restart": f"{restart} after {delay} s" if restart else "none",
           "finished": all(c == 0 for c in codes.values()) and bool(summary) and not summary.get("run_failed", True),
           "exit_codes": " ".join(f"{r}:{c}" for r, c in sorted(codes.items())),
           "longest_stall_s": round(stall, 2), "trained_samples": trained * BATCH,
           "center_samples": counted, "lost_samples": None if counted is None else trained * BATCH - counted,
           "wall_s": round(ended - started, 1), "run_failed_reason": summary.get("failure_reason", "")}
    failing = [p for p in processes if p.process.returncode != 0]
    if failing:
        row["stderr_tail"] = failing[0].stderr.strip().splitlines()[-1][:300] if failing[0].stderr.strip() else ""
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=list(CELLS), choices=list(CELLS))
    parser.add_argument("--csv")
    args = parser.parse_args()
    rows = []
    for name in args.only:
        row = run_cell(name)
        rows.append(row)
        print(json.dumps(row), flush=True)
    keys = ["cell", "placement", "killed", "restart", "finished", "exit_codes", "longest_stall_s", "trained_samples",
            "center_samples", "lost_samples", "wall_s", "center_bytes_sent"]
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys + ["run_failed_reason", "stderr_tail"], extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
