"""Servers on the ranks over a slow link: every rank but 0 exits the moment its finish()
returns, as a user's script ends, and rank 0's worker.center.wait() still gets the whole final
x~. Rank 1's host uploads at 4 Mbit/s, so its server's final range (0.5 MB) is on the link for
about a second after it was sent: a server that left on sending it would take it along, and rank
0 would fail after cluster.join_timeout_ms ("server 1 ... sent no x~ range"). Runs in the
testbed's network namespaces (exit 77 without root, ip netns or tc).

Run by meson with Debian's python3 (torch), the built package on PYTHONPATH."""

import json
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
SOURCE = os.environ.get("TETHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TESTBED = os.path.join(SOURCE, "experiments", "testbed", "testbed.py")
SLOW_MBIT = 4
JOIN_TIMEOUT_MS = 20000


def rank_main(out):
    import torch
    import tether.torch
    torch.manual_seed(0)  # every rank the same model: each server starts its range from its own
    model = torch.nn.Sequential(torch.nn.Linear(500, 500), torch.nn.ReLU(), torch.nn.Linear(500, 10))  # 255,510
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    worker = tether.torch.Worker.from_env(model, strategy={"name": "diloco", "communication_window": 5},
                                          server_placement="ranks", insecure=True, join_timeout_ms=JOIN_TIMEOUT_MS)
    g = torch.Generator().manual_seed(worker.rank)
    for _ in range(15):
        x = torch.randn(32, 500, generator=g)
        loss = torch.nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        worker.step(32)
    worker.finish()
    if worker.rank == 0:
        t = time.monotonic()
        state = worker.center.wait()
        model.load_state_dict(state)
        with open(out, "w") as f:
            json.dump({"wait_seconds": time.monotonic() - t, "finite": all(bool(torch.isfinite(v).all()) for v in state.values()),
                       "elements": sum(v.numel() for v in state.values())}, f)
    # Every other rank leaves at once: what a script does after its last line.


def main():
    # The testbed's --test mode exits 77 without root, ip netns or tc.
    with tempfile.TemporaryDirectory(prefix="rank-exit-") as work:
        spec = {"name": "rank-exit", "hosts": ["r0", "r1"], "link": {"rate_mbit": 100},
                "host_links": {"r1": {"rate_mbit": SLOW_MBIT}}, "timeout_s": 90,
                "env": {"OMP_NUM_THREADS": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                "programs": [{"name": "rank", "hosts": ["r0", "r1"],
                              "argv": ["{python}", os.path.abspath(__file__), "--rank", "{cell}/rank0.json"],
                              "env": {"RANK": "{rank}", "WORLD_SIZE": "{world}", "LOCAL_RANK": "0",
                                      "MASTER_ADDR": "{addr_r0}", "MASTER_PORT": "29500"}}],
                "collect": ["rank0.json"]}
        spec_path = os.path.join(work, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        out = os.path.join(work, "out")
        t = time.monotonic()
        done = subprocess.run([sys.executable, TESTBED, "run", spec_path, "--out", out, "--no-check", "--test"],
                              capture_output=True, text=True, timeout=150)
        print(done.stdout, done.stderr, f"({time.monotonic() - t:.1f} s)", sep="\n")
        if done.returncode == SKIP:
            return SKIP
        cell = os.path.join(out, "cells", "cell")
        logs = {name: open(os.path.join(cell, "logs", name + ".log")).read()[-2000:]
                for name in ("rank0", "rank1") if os.path.exists(os.path.join(cell, "logs", name + ".log"))}
        result = json.load(open(os.path.join(cell, "result.json")))
        assert done.returncode == 0 and result["status"] == "ok", (result.get("status"), logs)
        rank0 = result["collected"]["rank0.json"]
        assert rank0.get("finite") and rank0.get("elements") == 255510, (rank0, logs)
        # Not the join timeout's way out: the range arrived, it was not waited for in vain.
        assert rank0["wait_seconds"] < JOIN_TIMEOUT_MS / 1000, (rank0, logs)
        exits = {p["name"]: p["exit"] for p in result["processes"]}
        assert exits == {"rank0": 0, "rank1": 0}, (exits, logs)
        print(f"ok: rank 0 had the final x~ {rank0['wait_seconds']:.2f} s after its finish(); rank 1 at "
              f"{SLOW_MBIT} Mbit/s exited at once")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2])
    else:
        sys.exit(main())
