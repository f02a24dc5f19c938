#!/usr/bin/python3
"""The staleness sweeps' tuning ties broken on a second seed (docs/results.md, "Tuning ties in §1").

    experiments/sweeps/tie_break.py [--margin 0.003] [--jobs 2] [--out sweeps/tie_break]
        [--tether build/tether] [--dry-run] [--finals 5]

The staleness sweeps (docs/results.md §1) chose each cell's rate (strategy, N, τ) on one seed.
A cell is a tie where a neighbouring rate of its tuning grid ended within --margin (validation
accuracy, 0.003 = 0.3 points) of the winner on that seed (docs/results/staleness_*/tune.csv).
The winner and each tied neighbour run seeds 1 and 2 here, all on the current code (`tether
sweep` on their base, experiments/sweeps/fashion_base.json), and each cell is decided again on
the mean final validation accuracy over the two seeds (equal means going to the smaller rate,
as tune.py does; a run that failed or left no summary scores 0, and is named); the table says
whether the choice stands or flips. Writes OUT/ties.csv and prints the table. With --finals R,
each cell whose choice flips runs its new rate for seeds 3..R too, and OUT/finals.csv and the
second table give its final test accuracy over R seeds (mean ± 95% half-width, as §1's tables)
beside the sweep's figure at the old rate (docs/results/staleness_*/summary.csv). Run from the
repository root with PYTHONPATH=experiments:examples/python (experiments/README.md).
"""

import argparse
import csv
import json
import math
import sys
from pathlib import Path

from tetherlab.stats import interval
from tetherlab.tether_sweep import run_id, run_sweep

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1] / "docs" / "results"
SWEEPS = {"adag": "staleness_adag", "downpour": "staleness_downpour", "dynsgd": "staleness_dynsgd"}
KEYS = ("strategy.name", "cluster.workers", "strategy.communication_window")
RATE = "training.optimizer.learning_rate"


def ties(margin):
    """[(cell, winner rate, winner's seed-1 accuracy, [(neighbour rate, its seed-1 accuracy)])]."""
    found = []
    for sweep in SWEEPS.values():
        cells = {}
        with open(RESULTS / sweep / "tune.csv") as f:
            for row in csv.DictReader(f):
                cell = (row[KEYS[0]], int(row[KEYS[1]]), int(row[KEYS[2]]))
                cells.setdefault(cell, []).append((float(row[RATE]), float(row["mean_final_validation_accuracy"]),
                                                   row["won"] == "True"))
        for cell, tried in cells.items():
            tried.sort()
            winners = [i for i, (_, _, won) in enumerate(tried) if won]
            if len(winners) != 1:
                sys.exit(f"{sweep}/tune.csv: {cell} has {len(winners)} winners; expected one")
            w = winners[0]
            near = [tried[i][:2] for i in (w - 1, w + 1)
                    if 0 <= i < len(tried) and tried[w][1] - tried[i][1] <= margin + 1e-9]
            if near:
                found.append((cell, tried[w][0], tried[w][1], near))
    return found


def point(cell, rate, seed):
    return {KEYS[0]: cell[0], KEYS[1]: cell[1], KEYS[2]: cell[2], RATE: rate, "training.seed": seed}


def score(out, cell, rate, seed, missing, figure="final_validation_accuracy"):
    """A run's `figure` from its summary; 0 (and its name in `missing`) where the run failed."""
    path = out / run_id(list(point(cell, rate, seed).items()), 0) / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else {}
    value = summary.get(figure)
    if value is None or not math.isfinite(value) or summary.get("run_failed"):
        missing.append(f"{cell} at {rate:g}, seed {seed}")
        return 0.0
    return value


def run_points(args, name, points):
    """The sweep file into OUT, `tether sweep` over it (resumable; failed runs score 0)."""
    run_sweep(args, args.out / f"{name}.json",
                   {"name": name, "base": str(HERE / "fashion_base.json"), "points": points, "repeats": 1})


def staleness_finals(cell, rate):
    """The staleness sweep's final test accuracies of `cell` at `rate` (summary.csv, its 5 seeds)."""
    with open(RESULTS / SWEEPS[cell[0]] / "summary.csv") as f:
        return [float(r["final_test_accuracy"]) for r in csv.DictReader(f)
                if (r[KEYS[0]], int(r[KEYS[1]]), int(r[KEYS[2]])) == cell
                and math.isclose(float(r[RATE]), rate, rel_tol=0.02)]  # summary.csv rounds: 0.0032


def finals(args, flips, missing):
    """Seeds 3..R of each flipped cell's new rate; the table beside the old rate's figure."""
    run_points(args, "tie_break_finals", [point(c, new, seed) for c, old, new in flips
                                         for seed in range(3, args.finals + 1)])
    rows = []
    for c, old, new in flips:
        now = [score(args.out, c, new, seed, missing, "final_test_accuracy") for seed in range(1, args.finals + 1)]
        then = staleness_finals(c, old)
        if not then:
            sys.exit(f"tie_break: {SWEEPS[c[0]]}/summary.csv has no runs of {c} at {old:g}")
        (m, h, _), (m0, h0, _) = interval([100 * v for v in now]), interval([100 * v for v in then])
        rows.append({"strategy": c[0], "workers": c[1], "window": c[2], "old_rate": old, "old_test_mean": m0,
                     "old_test_ci95": h0, "old_seeds": len(then), "new_rate": new, "new_test_mean": m,
                     "new_test_ci95": h, "new_seeds": len(now)})
    with open(args.out / "finals.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"\n| strategy | N, τ | §1: rate, final test (%) | on 2 seeds: rate, final test over {args.finals} seeds (%) |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['strategy']} | {r['workers']}, {r['window']} | {r['old_rate']:g}: {r['old_test_mean']:.2f} ± "
              f"{r['old_test_ci95']:.2f} | {r['new_rate']:g}: {r['new_test_mean']:.2f} ± {r['new_test_ci95']:.2f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--margin", type=float, default=0.003, help="validation accuracy (0.003 = 0.3 points)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("sweeps") / "tie_break")
    parser.add_argument("--tether", default=str(HERE.parents[1] / "build" / "tether"))
    parser.add_argument("--dry-run", action="store_true", help="list the ties and the runs, run nothing")
    parser.add_argument("--finals", type=int, default=0, help="seeds of a flipped cell's new rate (3 or more)")
    args = parser.parse_args(argv)
    args.assignments = []  # run_sweep's --set: none here
    found = ties(args.margin)
    if not found:
        print(f"tie_break: no tied cells within {args.margin}")
        return
    points = [point(c, rate, seed) for c, winner, _, near in found for rate in [winner] + [r for r, _ in near]
              for seed in (1, 2)]
    print(f"tie_break: {len(found)} tied cells, {len(points)} runs (seeds 1 and 2)", flush=True)
    if args.dry_run:
        for c, rate, acc, near in found:
            print(f"  {c}: {rate:g} ({100 * acc:.2f}) against " + ", ".join(f"{r:g} ({100 * a:.2f})" for r, a in near))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    run_points(args, "tie_break", points)
    rows, missing, flips = [], [], []
    for cell, rate, acc, near in found:
        candidates = [(r, score(args.out, cell, r, 1, missing), score(args.out, cell, r, 2, missing), r == rate)
                      for r in [rate] + [r for r, _ in near]]
        best = max(candidates, key=lambda c: ((c[1] + c[2]) / 2, -c[0]))
        if best[0] != rate:
            flips.append((cell, rate, best[0]))
        for r, s1, s2, was_winner in candidates:
            rows.append({"strategy": cell[0], "workers": cell[1], "window": cell[2], "rate": r,
                         "seed1": s1, "seed2": s2, "mean": (s1 + s2) / 2, "seed1_winner": was_winner,
                         "two_seed_winner": r == best[0], "choice": "stands" if best[0] == rate else "flips"})
    with open(args.out / "ties.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("| strategy | N, τ | rate | seed 1 | seed 2 | mean | chosen in §1 | on 2 seeds |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['strategy']} | {r['workers']}, {r['window']} | {r['rate']:g} | {100 * r['seed1']:.2f} | "
              f"{100 * r['seed2']:.2f} | {100 * r['mean']:.2f} | {'yes' if r['seed1_winner'] else ''} | "
              f"{'yes' if r['two_seed_winner'] else ''} |")
    if missing:
        print("\nfailed or without a summary (scored 0): " + "; ".join(missing))
    print(f"\n{len(found)} tied cells; the choice flips in {len(flips)}: "
          + ", ".join(f"{c[0]} N={c[1]} τ={c[2]}" for c, _, _ in flips))
    if flips and args.finals >= 3:
        finals(args, flips, missing)
        if missing:
            print("\nwithout a final test accuracy (scored 0): " + "; ".join(missing))


if __name__ == "__main__":
    main()
