#!/usr/bin/python3
"""experiments/testbed/grid_report.py's ratios on testbed results made here: a ratio A/B is
taken seed by seed (two seeds at exactly 0.5x give 0.500 with a zero-width interval, however far
apart the seeds are), a seed that one side did not finish is left out of the pairs, a name that
is in no result is refused with the names there are, and --seeds-csv keeps every run's time.
Run by meson test with TETHER_SOURCE_DIR."""
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import case, main

REPORT = Path(os.environ["TETHER_SOURCE_DIR"]) / "experiments/testbed/grid_report.py"


def cell(root, config, seed, time_to_target, status="ok"):
    d = Path(root) / "cells" / f"{config},rate_mbit=10,seed={seed}"
    d.mkdir(parents=True)
    links = {h: {"rate_mbit": 10} for h in ("w0", "w1")}
    summary = {"curve": [{"seconds": 0, "validation_accuracy": 0.1},
                         {"seconds": time_to_target, "validation_accuracy": 0.87}],
               "time_to_target": time_to_target, "training_seconds": time_to_target,
               "final_validation_accuracy": 0.87, "final_test_accuracy": 0.86}
    (d / "result.json").write_text(json.dumps({
        "cell": {"name": d.name, "links": links}, "status": status, "seconds": time_to_target,
        "processes": [{"host": "w0"}, {"host": "w1"}],
        "link_bytes": {"w0": {"sent": 1e6, "received": 1e6}, "w1": {"sent": 1e6, "received": 1e6}},
        "collected": {"ddp.json": summary} if status == "ok" else {}}))


def report(root, *args):
    return subprocess.run([sys.executable, str(REPORT), root, *args], capture_output=True, text=True, timeout=60)


@case
def ratios_are_taken_per_seed_and_unknown_names_refused():
    with tempfile.TemporaryDirectory() as root:
        for seed, scale in ((1, 1.0), (2, 5.0)):  # seed 2 five times slower for both
            cell(root, "slow", seed, 20.0 * scale)
            cell(root, "fast", seed, 10.0 * scale)
        cell(root, "slow", 3, 20.0)
        cell(root, "fast", 3, 0.0, status="failed")  # no pair for seed 3
        done = report(root, "--ratio", "fast/slow", "--seeds-csv", f"{root}/seeds.csv")
        assert done.returncode == 0, done.stderr
        assert "10 Mbit/s: time to target 0.500 [0.500, 0.500] (2 seeds)" in done.stdout, done.stdout
        assert "final validation accuracy 1.0000 [1.0000, 1.0000] (2 seeds)" in done.stdout, done.stdout
        with open(f"{root}/seeds.csv") as f:
            rows = {(r["config"], r["seed"]): r for r in csv.DictReader(f)}
        assert rows[("slow", "2")]["time_to_target"] == "100.0", rows
        assert rows[("fast", "3")]["status"] == "failed", rows
        refused = report(root, "--ratio", "fats/slow")
        assert refused.returncode != 0 and "no configuration 'fats'" in refused.stderr, refused.stderr
        assert "fast, slow" in refused.stderr, refused.stderr


if __name__ == "__main__":
    sys.exit(main())
