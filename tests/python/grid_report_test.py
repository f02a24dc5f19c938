#!/usr/bin/python3
"""experiments/testbed/grid_report.py's ratios on testbed results made here: a ratio A/B is
taken seed by seed as a geometric mean (per-seed ratios 0.25 and 1 give 0.5, where the ratio of
the means would be 0.667), a seed that one side did not finish or did not reach the target is
left out of the time's pairs and counted as left out, accuracy and loss ratios pair every
finished seed, a name that is in no result is refused with the names there are, and --seeds-csv
keeps every run's figures. Run by meson test with TETHER_SOURCE_DIR."""
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import case, main

REPORT = Path(os.environ["TETHER_SOURCE_DIR"]) / "experiments/testbed/grid_report.py"


def cell(root, config, seed, time_to_target, status="ok", validation=0.87, loss=0.4):
    d = Path(root) / "cells" / f"{config},rate_mbit=10,seed={seed}"
    d.mkdir(parents=True)
    links = {h: {"rate_mbit": 10} for h in ("w0", "w1")}
    summary = {"curve": [{"seconds": 0, "validation_accuracy": 0.1},
                         {"seconds": time_to_target or 30.0, "validation_accuracy": validation}],
               "time_to_target": time_to_target, "training_seconds": time_to_target or 30.0,
               "final_validation_accuracy": validation, "final_validation_loss": loss, "final_test_accuracy": 0.5}
    (d / "result.json").write_text(json.dumps({
        "cell": {"name": d.name, "links": links}, "status": status, "seconds": time_to_target or 30.0,
        "processes": [{"host": "w0"}, {"host": "w1"}],
        "link_bytes": {"w0": {"sent": 1e6, "received": 1e6}, "w1": {"sent": 1e6, "received": 1e6}},
        "collected": {"ddp.json": summary} if status == "ok" else {}}))


def report(root, *args):
    return subprocess.run([sys.executable, str(REPORT), root, *args], capture_output=True, text=True, timeout=60)


@case
def ratios_are_taken_per_seed_and_unknown_names_refused():
    with tempfile.TemporaryDirectory() as root:
        cell(root, "fast", 1, 10.0, validation=0.80, loss=0.3)  # 10 against 40 s: 0.25
        cell(root, "slow", 1, 40.0, validation=0.80, loss=0.6)
        cell(root, "fast", 2, 50.0, validation=0.90, loss=0.4)  # 50 against 50 s: 1
        cell(root, "slow", 2, 50.0, validation=0.90, loss=0.4)
        cell(root, "fast", 3, None, validation=0.72, loss=0.5)  # ok, never reached the target
        cell(root, "slow", 3, 20.0, validation=0.80, loss=0.5)
        cell(root, "slow", 4, 20.0)
        cell(root, "fast", 4, 0.0, status="failed")  # no pair for seed 4
        done = report(root, "--ratio", "fast/slow", "--seeds-csv", f"{root}/seeds.csv")
        assert done.returncode == 0, done.stderr
        line = next(l for l in done.stdout.splitlines() if l.startswith("- 10 Mbit/s"))
        # Time: seeds 1-2 only, geometric mean of 0.25 and 1, an interval of non-zero width.
        assert "time to target 0.500 [" in line and "] (2 of 3 seeds)" in line, line
        assert "0.500 [0.500" not in line, line
        # Accuracy: 1, 1 and 0.9 over the 3 finished pairs; loss: 0.5, 1 and 1.
        assert "final validation accuracy 0.9655 [" in line and "(3 of 3 seeds)" in line, line
        assert "final validation loss 0.7937 [" in line, line
        with open(f"{root}/seeds.csv") as f:
            rows = {(r["config"], r["seed"]): r for r in csv.DictReader(f)}
        assert rows[("slow", "1")]["time_to_target"] == "40.0", rows
        assert rows[("fast", "3")]["time_to_target"] == "" and rows[("fast", "3")]["final_validation_loss"] == "0.5", rows
        assert rows[("fast", "4")]["status"] == "failed", rows
        refused = report(root, "--ratio", "fats/slow")
        assert refused.returncode != 0 and "no configuration 'fats'" in refused.stderr, refused.stderr
        assert "fast, slow" in refused.stderr, refused.stderr


if __name__ == "__main__":
    sys.exit(main())
