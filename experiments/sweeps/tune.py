#!/usr/bin/python3
"""Tune one rate of a sweep until the best value is strictly inside its grid.

    experiments/sweeps/tune.py SWEEP.json --key training.optimizer.learning_rate
        [--metric final|best] [--max-extensions 3] [--jobs J] [--repeats R] [--set KEY=VALUE]
        [--out DIR] [--tether build/tether] [--final-repeats R]

SWEEP.json's grid must list `--key` (a rate: positive, log-spaced, at least two values). Every
other grid key and every point is kept: each combination of them (e.g. strategy x N) is tuned
on its own. For each combination the initial values of `--key` run (with the sweep's seeds);
while the best mean validation accuracy over the seeds (the last evaluation's with --metric
final, the default, or the best evaluation's with best) is at the top or the bottom of the
values tried, one more value beyond that edge is added, a grid step further (the factor between
the initial values), until the best is strictly inside or --max-extensions values were added
at that edge. A rate with a diverged run (no accuracy) counts as accuracy 0.

The runs are `tether sweep` runs of a sweep file written to OUT/tune_sweep.json (one point per
combination and value), into OUT (default sweeps/<name>): re-running continues, and runs
already complete are skipped, as `tether sweep` does. Written to OUT: tune.csv (every
combination and value: seeds, mean and sd of the metric, whether it won), tune_result.csv (per
combination: the winning value, whether it was strictly inside the values tried, the values
tried) and tune.md with both, so a results table can say which rate won and that it was inside.

With --final-repeats R, each combination's winning value then runs with R seeds (the tuning's
seeds are reused: same run directories) from OUT/final_sweep.json; OUT/summary.csv and
summary_by_point.csv are then those final runs', the tables a claim is read from.

Run from the repository root with PYTHONPATH=experiments:examples/python (experiments/README.md).
"""
import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path

from tetherlab.tether_sweep import run_id, run_sweep


def significant(value, digits=3):
    """`value` to `digits` significant digits, so an added value reads (and names its run) as 0.0316."""
    return float(f"{value:.{digits - 1}e}")


def grid_factor(values):
    """The factor between neighbouring values of a log-spaced grid (their geometric mean)."""
    values = sorted(values)
    if len(values) < 2 or values[0] <= 0:
        raise ValueError(f"expected two or more positive values to tune, got {values}")
    return (values[-1] / values[0]) ** (1 / (len(values) - 1))


def widen(means, factor, added, max_extensions):
    """The value to add next for one combination, or None when done.

    means: {value: mean metric} of the values tried; added: {"low": n, "high": n} values added
    so far beyond each edge. Ties go to the smaller value (the safer rate)."""
    values = sorted(means)
    best = max(values, key=lambda v: (means[v], -v))
    if len(values) >= 2 and best == values[-1] and added["high"] < max_extensions:
        return "high", significant(values[-1] * factor)
    if len(values) >= 2 and best == values[0] and added["low"] < max_extensions:
        return "low", significant(values[0] / factor)
    return None


def verdict(means):
    """(winning value, strictly inside the values tried)."""
    values = sorted(means)
    best = max(values, key=lambda v: (means[v], -v))
    return best, values[0] < best < values[-1]


def combinations_of(sweep, key):
    """The other grid keys and the points, as a list of ordered lists of (key, value)."""
    grid = {k: v for k, v in sweep.get("grid", {}).items() if k != key}
    combos = [[]]
    for k, values in grid.items():  # the last key varies fastest, as tether sweep orders runs
        combos = [c + [(k, v)] for c in combos for v in values]
    points = sweep.get("points") or [{}]
    return [c + list(p.items()) for c in combos for p in points]


def read_metric(run_dir, metric):
    path = run_dir / "summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    value = summary.get(f"{metric}_validation_accuracy")
    if value is None and "evaluation_set" in summary and summary["evaluation_set"] != "validation":
        sys.exit(f"{path}: no validation split (data.validation_samples is 0); tuning reads the validation set only")
    return 0.0 if value is None or not math.isfinite(value) else value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--key", required=True, help="the grid key to tune, e.g. training.optimizer.learning_rate")
    parser.add_argument("--metric", choices=["final", "best"], default="final")
    parser.add_argument("--max-extensions", type=int, default=3, help="values added beyond each edge at most")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--final-repeats", type=int, help="seeds per combination at its winning value, afterwards")
    parser.add_argument("--set", action="append", default=[], dest="assignments")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tether", default=str(Path(__file__).resolve().parents[2] / "build" / "tether"))
    args = parser.parse_args(argv)

    sweep = json.loads(args.sweep.read_text())
    name = sweep.get("name", args.sweep.stem)
    if args.key not in sweep.get("grid", {}):
        sys.exit(f"{args.sweep}: grid has no {args.key}; list its initial values there, e.g. [0.0001, 0.001, 0.01]")
    if "reference" in sweep:
        sys.exit(f"{args.sweep}: reference: a tuned sweep has none (each combination picks its own value)")
    initial = sweep["grid"][args.key]
    try:
        factor = grid_factor(initial)
    except ValueError as e:
        sys.exit(f"{args.sweep}: grid.{args.key}: {e}")
    if args.max_extensions < 0:
        sys.exit("--max-extensions must be 0 or more")
    out = args.out or Path("sweeps") / name
    out.mkdir(parents=True, exist_ok=True)
    base = sweep["base"]
    if isinstance(base, str):
        base = str((args.sweep.parent / base).resolve())
    repeats = args.repeats or sweep.get("repeats", 1)
    combos = combinations_of(sweep, args.key)
    tried = [sorted(initial) for _ in combos]
    added = [{"low": 0, "high": 0} for _ in combos]
    # Each round runs every value tried so far; re-running (after an interruption, say) replays
    # the same rounds from the same tables, and tether sweep skips the runs already complete.
    while True:
        points = [dict(combo + [(args.key, v)]) for combo, values in zip(combos, tried) for v in values]
        run_sweep(args, out / "tune_sweep.json", {"name": name, "base": base, "points": points, "repeats": repeats})
        table, more = [], False
        for i, combo in enumerate(combos):
            means = {}
            for v in tried[i]:
                scores = [read_metric(out / run_id(combo + [(args.key, v)], r), args.metric) for r in range(repeats)]
                if any(s is None for s in scores):
                    sys.exit(f"tune: {out}: a run of {dict(combo + [(args.key, v)])} has no summary.json")
                means[v] = statistics.mean(scores)
                table.append((combo, v, scores))
            step = widen(means, factor, added[i], args.max_extensions)
            if step:
                edge, value = step
                added[i][edge] += 1
                tried[i] = sorted(tried[i] + [value])
                more = True
        if not more:
            break
    winners = write_tables(out, args.key, args.metric, combos, tried, table)
    if args.final_repeats:
        points = [dict(combo + [(args.key, w)]) for combo, w in zip(combos, winners)]
        run_sweep(args, out / "final_sweep.json", {"name": name, "base": base, "points": points,
                                                     "repeats": args.final_repeats})
    return 0


def write_tables(out, key, metric, combos, tried, table):
    """Writes the tables; returns each combination's winning value."""
    keys = [k for k, _ in combos[0]]
    rows, results, winners = [], [], []
    for i, combo in enumerate(combos):
        entries = [(v, scores) for c, v, scores in table if c == combo]
        best, inside = verdict({v: statistics.mean(s) for v, s in entries})
        winners.append(best)
        for v, scores in entries:
            sd = statistics.stdev(scores) if len(scores) > 1 else 0.0
            rows.append([x for _, x in combo] + [v, len(scores), statistics.mean(scores), sd, v == best])
        best_scores = dict(entries)[best]
        results.append([x for _, x in combo] + [best, inside, statistics.mean(best_scores), len(best_scores),
                                                " ".join(f"{v:g}" for v in tried[i])])
    figure = f"{metric}_validation_accuracy"
    head = keys + [key, "seeds", f"mean_{figure}", f"sd_{figure}", "won"]
    result_head = keys + [f"best_{key}", "strictly_inside", f"mean_{figure}", "seeds", "values_tried"]
    for path, header, body in ((out / "tune.csv", head, rows), (out / "tune_result.csv", result_head, results)):
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([header] + body)

    def markdown(header, body):
        def cell(x):
            return f"{x:.4g}" if isinstance(x, float) else str(x)

        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(cell(x) for x in row) + " |" for row in body]) + "\n"

    (out / "tune.md").write_text(
        f"# Tuning {key}\n\nPer combination of the other keys: the value of {key} with the best mean {figure} over "
        f"its seeds, and whether it was strictly inside the values tried (experiments/sweeps/tune.py).\n\n"
        + markdown(result_head, results) + "\n## Every value tried\n\n" + markdown(head, rows))
    for row in results:
        print("tune:", ", ".join(f"{k}={v}" for k, v in zip(result_head, row)))
    return winners


if __name__ == "__main__":
    sys.exit(main())
