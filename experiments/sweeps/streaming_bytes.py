#!/usr/bin/python3
"""Streaming DiLoCo against plain DiLoCo: accuracy, time and what a worker sends, per point of a
tether sweep (experiments/sweeps/streaming_diloco.json).

    experiments/sweeps/streaming_bytes.py sweeps/streaming_diloco [--csv FILE]

Per point (its seeds pooled): final validation and test accuracy (mean ± 95% CI), wall seconds,
exchanges per worker, the bytes a worker sent to the center over the run, and the largest single
exchange any worker sent (bytes_to_center in exchanges.jsonl, every server's) and how many times
smaller it is than the sweep's largest (plain DiLoCo in float32). During training a
worker sends at most one exchange after a step (tests/unit/exchange_policy_test.cpp), so that
largest exchange is its peak per step; `finish()` alone may send several fragments at once.
Run from the repository root with PYTHONPATH=experiments:examples/python (experiments/README.md).
"""
import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

from tetherlab.stats import interval


def point_of(run_dir):
    return ",".join(p for p in run_dir.name.split(",") if not p.startswith("repeat="))


def measure(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    exchanges = [json.loads(line) for line in (run_dir / "exchanges.jsonl").read_text().splitlines() if line]
    workers = max(1, summary["workers_finished"])
    return {
        "validation": summary["final_validation_accuracy"] * 100,
        "test": summary["final_test_accuracy"] * 100,
        "seconds": summary["wall_seconds"],
        "exchanges": len(exchanges) / workers,
        "mb_per_worker": sum(e["bytes_to_center"] for e in exchanges) / workers / 1e6,
        "peak_kb": max(e["bytes_to_center"] for e in exchanges) / 1e3,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--csv", type=Path)
    a = parser.parse_args(argv)
    points = {}
    for run_dir in sorted(a.sweep_dir.iterdir()):
        if (run_dir / "summary.json").is_file() and (run_dir / "exchanges.jsonl").is_file():
            points.setdefault(point_of(run_dir), []).append(measure(run_dir))
    if not points:
        sys.exit(f"{a.sweep_dir}: no finished runs (summary.json and exchanges.jsonl) in it")
    rows = []
    for point, runs in points.items():
        row = {"point": point, "seeds": len(runs)}
        for key in ("validation", "test", "seconds"):
            row[key], row[key + "_ci"], _ = interval([r[key] for r in runs])
        for key in ("exchanges", "mb_per_worker", "peak_kb"):
            row[key] = statistics.mean(r[key] for r in runs)
        rows.append(row)
    largest = max(r["peak_kb"] for r in rows)  # plain DiLoCo in float32: all of x at once
    for row in rows:
        row["peak_ratio"] = largest / row["peak_kb"]
    print("| point | seeds | validation % | test % | seconds | exchanges / worker | MB / worker | largest exchange (kB) | peak ÷ |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['point']} | {r['seeds']} | {r['validation']:.2f} ± {r['validation_ci']:.2f} | {r['test']:.2f} ± "
              f"{r['test_ci']:.2f} | {r['seconds']:.1f} ± {r['seconds_ci']:.1f} | {r['exchanges']:.0f} | "
              f"{r['mb_per_worker']:.1f} | {r['peak_kb']:.0f} | {r['peak_ratio']:.2f} |")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
