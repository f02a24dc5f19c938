#!/usr/bin/python3
"""A results table with 95% confidence intervals from a tuned sweep's final runs.

    experiments/sweeps/ci_table.py OUT --rows cluster.workers
        --cols strategy.communication_window [--value final_test_accuracy] [--percent]
        [--sweep final_sweep.json] [--csv FILE]

OUT is a directory experiments/sweeps/tune.py --final-repeats wrote (or any tether sweep directory
with its sweep file given by --sweep). Each cell: the mean over the point's seeds and the
half-width of its 95% confidence interval (Student's t, n - 1 degrees of freedom: the seeds are
few), as "88.52 ± 0.31"; a run that failed (diverged) counts with the accuracy it ended with and
is flagged with its count ("†2"). With tune_result.csv beside it, the tuned rate of each cell and
whether it was strictly inside its grid are listed under the table. Prints markdown; --csv also
writes one row per cell (mean, half-width, sd, n, failed). Run from the repository root with
PYTHONPATH=experiments:examples/python (experiments/README.md).
"""
import argparse
import csv
import itertools
import json
import sys
from pathlib import Path

from tetherlab.stats import interval
from tetherlab.tether_sweep import run_id


def cells_of(out, sweep, value):
    """{(point as a tuple of items): ([values], failed count)} over each point's repeats."""
    cells = {}
    for point in sweep["points"]:
        values, failed = [], 0
        for r in range(sweep.get("repeats", 1)):
            path = out / run_id(list(point.items()), r) / "summary.json"
            if not path.is_file():
                continue
            s = json.loads(path.read_text())
            failed += bool(s.get("run_failed"))
            if s.get(value) is not None:
                values.append(s[value])
        cells[tuple(point.items())] = (values, failed)
    return cells


def expanded(sweep):
    """The sweep with its grid multiplied into its points, keys in the order tether sweep names
    its runs by (the grid's in file order, then the point's), so run_id finds them."""
    grid = sweep.get("grid")
    if not grid:
        return sweep
    points = []
    for values in itertools.product(*grid.values()):
        for point in sweep.get("points") or [{}]:
            points.append({**dict(zip(grid, values)), **point})
    return {**sweep, "points": points}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rows", required=True, help="a key, or keys separated by ',' (one row per combination)")
    parser.add_argument("--cols", required=True)
    parser.add_argument("--value", default="final_test_accuracy")
    parser.add_argument("--percent", action="store_true", help="show accuracies in percent")
    parser.add_argument("--sweep", default="final_sweep.json",
                        help="the sweep file under OUT, or any path (a grid is multiplied into the points)")
    parser.add_argument("--csv", type=Path)
    args = parser.parse_args(argv)
    sweep = expanded(json.loads((args.out / args.sweep).read_text()))
    cells = cells_of(args.out, sweep, args.value)
    scale = 100 if args.percent else 1
    row_keys = args.rows.split(",")  # several keys: a row per combination, labelled "a / b"

    def row_of(point):
        return " / ".join(str(dict(point)[k]) for k in row_keys) if len(row_keys) > 1 else dict(point)[args.rows]

    rows = sorted({row_of(k) for k in cells}, key=lambda v: (str(type(v)), v))
    cols = sorted({dict(k)[args.cols] for k in cells}, key=lambda v: (str(type(v)), v))
    table = {(row_of(k), dict(k)[args.cols]): v for k, v in cells.items()}
    lines = [f"| {args.rows} \\ {args.cols} | " + " | ".join(str(c) for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    records = []
    for r in rows:
        entries = []
        for c in cols:
            if (r, c) not in table or not table[(r, c)][0]:
                entries.append("")
                continue
            values, failed = table[(r, c)]
            mean, half, sd = interval([v * scale for v in values])
            entries.append(f"{mean:.2f} ± {half:.2f}" + (f" †{failed}" if failed else "") + f" (n={len(values)})")
            records.append([r, c, mean, half, sd, len(values), failed])
        lines.append(f"| {r} | " + " | ".join(entries) + " |")
    print("\n".join(lines))
    result = args.out / "tune_result.csv"
    if result.is_file():
        with open(result) as f:
            tuned = list(csv.DictReader(f))
        key = next(k for k in tuned[0] if k.startswith("best_"))
        print("\nTuned " + key[5:] + " per cell (" + args.rows + ", " + args.cols + "): " + "; ".join(
            ", ".join(str(t[k]) for k in (args.rows, args.cols) if k in t) + f": {float(t[key]):g}"
            f"{'' if t['strictly_inside'] == 'True' else ' (at the edge)'}"
            for t in tuned))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            csv.writer(f).writerows([[args.rows, args.cols, "mean", "ci95_half_width", "sd", "n", "failed"]] + records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
