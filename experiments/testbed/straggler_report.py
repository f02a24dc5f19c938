#!/usr/bin/python3
"""The table of docs/results.md §13 from straggler_mlp.py's cells: for each cell, time to target
and final validation loss per seed, and each seed's ratio to the ring's cell of the same seed
and straggler, with the mean ratio's 95% interval (Student's t over the seeds).

    experiments/testbed/straggler_report.py DIR [--csv FILE]   (FILE: one row per cell and seed)

DIR holds CELL_sSEED.json files (CELL: ring_0.2, tether_0.2, tether6_0.2, sgd0.4_0.2, and the same with _0), as
runs of straggler_mlp.py write them with --out DIR/CELL_sSEED.json, or is the testbed's --out
of specs/straggler.json (cells/CELL,seed=SEED/straggler.json)."""

import csv
import glob
import json
import math
import os
import re
import sys

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def interval(values):
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, T95.get(n - 1, 1.96) * sd / math.sqrt(n)


def main():
    directory = sys.argv[1]
    csv_path = sys.argv[sys.argv.index("--csv") + 1] if "--csv" in sys.argv else None
    cells = {}
    for path in glob.glob(os.path.join(directory, "*_s*.json")):
        cell, seed = re.match(r"(.+)_s(\d+)\.json$", os.path.basename(path)).groups()
        cells.setdefault(cell, {})[int(seed)] = json.load(open(path))
    # The testbed's out directory (specs/straggler.json): cells/CELL,seed=SEED/straggler.json.
    for path in glob.glob(os.path.join(directory, "cells", "*,seed=*", "straggler.json")):
        cell, seed = re.match(r"(.+),seed=(\d+)$", os.path.basename(os.path.dirname(path))).groups()
        cells.setdefault(cell, {})[int(seed)] = json.load(open(path))
    print("| cell | seeds | time to target (s), per seed | ÷ the ring, mean ± 95% | final val. loss | ÷ the ring's loss | reached | run's length (s), mean | longest idle at the end (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cell in sorted(cells, key=lambda c: (c.split("_")[1], c.split("_")[0] != "ring", c)):
        ring = cells.get("ring_" + cell.split("_")[1], {})
        runs = cells[cell]
        seeds = sorted(runs)
        times = [runs[s]["time_to_target"] for s in seeds]
        ratios = [runs[s]["time_to_target"] / ring[s]["time_to_target"] for s in seeds
                  if s in ring and runs[s]["time_to_target"] and ring[s]["time_to_target"]]
        losses = [runs[s]["final_validation_loss"] for s in seeds]
        loss_ratios = [runs[s]["final_validation_loss"] / ring[s]["final_validation_loss"] for s in seeds if s in ring]
        fmt = lambda t: "—" if t is None else f"{t:.1f}"
        mean, half = interval(ratios) if ratios else (float("nan"), float("nan"))
        lmean, lhalf = interval(loss_ratios) if loss_ratios else (float("nan"), float("nan"))
        reached = sum(t is not None for t in times)
        length = sum(runs[s]["training_seconds"] for s in seeds) / len(seeds)
        idle = [max(runs[s]["worker_idle_seconds"].values()) for s in seeds if runs[s].get("worker_idle_seconds")]
        print(f"| {cell} | {','.join(map(str, seeds))} | {' / '.join(fmt(t) for t in times)} | "
              f"{mean:.2f} ± {half:.2f} (n={len(ratios)}) | {sum(losses) / len(losses):.4f} | {lmean:.3f} ± {lhalf:.3f} | "
              f"{reached}/{len(times)} | {length:.1f} | {f'{max(idle):.2f}' if idle else '—'} |")


    if csv_path:
        with open(csv_path, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["cell", "seed", "time_to_target_s", "final_validation_accuracy", "final_validation_loss",
                          "training_seconds", "longest_idle_s"])
            for cell in sorted(cells):
                for seed, r in sorted(cells[cell].items()):
                    idle = r.get("worker_idle_seconds")
                    out.writerow([cell, seed, r["time_to_target"], r["final_validation_accuracy"],
                                  r["final_validation_loss"], r["training_seconds"], max(idle.values()) if idle else ""])


if __name__ == "__main__":
    main()
