#!/usr/bin/python3
"""§1's tuning ties broken on a second seed (docs/results.md, "Tuning ties in §1"; issue 40).

    tie_break.py [--margin 0.003] [--jobs 2] [--out sweeps/tie_break] [--tether build/tether] [--dry-run]

§1 chose each cell's rate (strategy, N, τ) on one seed. A cell is a tie where a neighbouring rate
of its tuning grid ended within --margin (validation accuracy, 0.003 = 0.3 points) of the
winner on that seed (docs/results/staleness_*/tune.csv). The winner and each tied neighbour run
seeds 1 and 2 here, all on today's code (`tether sweep` on §1's base,
experiments/fashion_base.json), and each cell is decided again on the mean final validation
accuracy over the two seeds (equal means going to the smaller rate, as tune.py does; a run that
failed or left no summary scores 0, and is named); the table says whether the choice stands or
flips. Writes OUT/ties.csv and prints the table.
"""

import argparse
import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import tune  # noqa: E402  (run_id: the directory tether sweep gives a run)

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "docs" / "results"
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


def score(out, cell, rate, seed, missing):
    """A run's final validation accuracy; 0 (and its name in `missing`) where it failed."""
    path = out / tune.run_id(list(point(cell, rate, seed).items()), 0) / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else {}
    value = summary.get("final_validation_accuracy")
    if value is None or not math.isfinite(value) or summary.get("run_failed"):
        missing.append(f"{cell} at {rate:g}, seed {seed}")
        return 0.0
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--margin", type=float, default=0.003, help="validation accuracy (0.003 = 0.3 points)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("sweeps") / "tie_break")
    parser.add_argument("--tether", default=str(HERE.parent / "build" / "tether"))
    parser.add_argument("--dry-run", action="store_true", help="list the ties and the runs, run nothing")
    args = parser.parse_args(argv)
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
    sweep = args.out / "tie_break.json"
    sweep.write_text(json.dumps({"name": "tie_break", "base": str(HERE / "fashion_base.json"), "points": points,
                                 "repeats": 1}, indent=2) + "\n")
    command = [args.tether, "sweep", str(sweep), "--out", str(args.out), "--jobs", str(args.jobs)]
    print("tie_break:", " ".join(command), flush=True)
    code = subprocess.run(command, stdout=subprocess.DEVNULL).returncode
    if code not in (0, 1):  # 1: some run failed, a result (scored 0 below)
        sys.exit(f"tie_break: {' '.join(command)} failed (exit {code})")
    rows, missing = [], []
    for cell, rate, acc, near in found:
        candidates = [(r, score(args.out, cell, r, 1, missing), score(args.out, cell, r, 2, missing), r == rate)
                      for r in [rate] + [r for r, _ in near]]
        best = max(candidates, key=lambda c: ((c[1] + c[2]) / 2, -c[0]))
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
    flips = sorted({(r["strategy"], r["workers"], r["window"]) for r in rows if r["choice"] == "flips"})
    print(f"\n{len(found)} tied cells; the choice flips in {len(flips)}: " + ", ".join(f"{s} N={n} τ={t}" for s, n, t in flips))


if __name__ == "__main__":
    main()
