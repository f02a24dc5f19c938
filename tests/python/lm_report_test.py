#!/usr/bin/python3
"""experiments/lm/report.py on testbed results made here: time to a target interpolated between
two evaluations, a run that never reaches it counted as not reached, the busiest link taken from
the hosts' counters, the compute share from the compute-only cell, and a ratio's interval taken
per seed (two seeds at exactly 2x give 2.00 with a zero-width interval, whatever each side's
spread). Run by meson test with TETHER_SOURCE_DIR."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import case, main

REPORT = Path(os.environ["TETHER_SOURCE_DIR"]) / "experiments/lm/report.py"


def cell(root, peer, name, curve, links, steps=100):
    d = Path(root) / f"lm_{peer}" / "cells" / name
    d.mkdir(parents=True)
    summary = {"curve": [{"step": s, "seconds": t, "validation_loss": l} for s, t, l in curve],
               "final_validation_loss": curve[-1][2], "training_seconds": curve[-1][1], "config": {"steps": steps}}
    (d / "result.json").write_text(json.dumps({"status": "ok", "collected": {"lm.json": summary},
                                               "link_bytes": {h: {"sent": s, "received": r} for h, (s, r) in links.items()}}))


@case
def times_busiest_links_compute_shares_and_per_seed_ratios():
    with tempfile.TemporaryDirectory() as root:
        for seed, scale in ((1, 1.0), (2, 3.0)):  # seed 2 three times slower for both methods
            cell(root, "torchft", f"diloco,rate_mbit=10,seed={seed}", [(0, 0, 3.0), (50, 10 * scale, 2.0),
                                                                       (100, 20 * scale, 1.0)],
                 {"w0": (5e6, 5e6), "w1": (4e6, 4e6)})
            cell(root, "tether", f"diloco,rate_mbit=10,seed={seed}", [(0, 0, 3.0), (50, 5 * scale, 2.0),
                                                                      (100, 10 * scale, 1.0)],
                 {"w0": (2e6, 3e6), "w1": (1e6, 1e6)})
            cell(root, "tether", f"never,rate_mbit=10,seed={seed}", [(0, 0, 3.0), (100, 10, 2.9)], {"w0": (1, 1)})
        cell(root, "ddp", "compute-only,rate_mbit=10,seed=1", [(0, 0, 3.0), (100, 4.0, 1.0)], {"w0": (0, 0)})
        done = subprocess.run([sys.executable, str(REPORT), f"{root}/lm_ddp", f"{root}/lm_torchft", f"{root}/lm_tether",
                               "--target", "1.5", "--ratio", "tether diloco/torchft diloco"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        rows = {line.split(" | ")[1]: line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| 10 |")}
        # Halfway between 2.0 (at 10 s) and 1.0 (at 20 s): 15 s for seed 1, 45 s for seed 2.
        assert rows["torchft diloco"][3].startswith("30.0 ± "), rows["torchft diloco"]
        assert rows["torchft diloco"][4] == "2/2"
        assert rows["tether never"][4] == "0/2" and rows["tether never"][3] == "-", rows["tether never"]
        assert rows["torchft diloco"][7].startswith("10 ") and "(w0)" in rows["torchft diloco"][7]
        # 4 s for 100 steps alone: 4/20 and 4/60 of the training times.
        assert rows["torchft diloco"][8].startswith("13 ± "), rows["torchft diloco"]
        assert "10 Mbit/s: time to target 0.50 [0.50, 0.50] (2)" in done.stdout, done.stdout


if __name__ == "__main__":
    sys.exit(main())
