#!/usr/bin/python3
"""Figures from tether run and sweep directories (matplotlib, Debian's python3-matplotlib).

    /usr/bin/python3 experiments/plot.py RUN_DIR [RUN_DIR...]   accuracy over time and over samples
    /usr/bin/python3 experiments/plot.py SWEEP_DIR              comparison figures of a sweep

A run directory holds metrics.jsonl; a sweep directory holds summary.csv and one run
directory per run. A run directory of the Python API (CenterService(run_dir=...)) has its curve
from the scalars its workers logged (worker.log(validation_accuracy=...)): one line per worker
when several did. PNGs are written into the directory given (or --out DIR) and listed.
Curves are on the validation set (on the test set for runs without one, or written before
tether had one). In a sweep, the repeats (seeds) of a grid point are drawn as their mean with a
band of ± one sample standard deviation; each strategy has its own colour family. Labels,
colours and titles: tetherlab/plot_style.py.
"""
import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# tetherlab/ sits beside this file, and Python puts a script's folder first on its path.
from tetherlab.plot_style import colour_lines, common_title, label, point_label, read_json, set_name  # noqa: E402

def read_rows(run_dir):
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        sys.exit(f"{path}: not found; is {run_dir} a tether run directory?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_curve(source):
    """(rows sorted by time, the accuracy key): validation_accuracy, or test_accuracy. `source` is
    a run directory, or (run directory, worker id) for the rows one worker of a Python run logged
    (tagged "worker"; a value logged as null, not finite, is no point)."""
    run_dir, worker = source if isinstance(source, tuple) else (source, None)
    rows = read_rows(run_dir)
    key = "validation_accuracy" if any("validation_accuracy" in r for r in rows) else "test_accuracy"
    rows = [r for r in rows if r.get(key) is not None and (worker is None or r.get("worker") == worker)]
    return sorted(rows, key=lambda r: r["wall_seconds"]), key


def curve_workers(run_dir):
    """The workers whose logged rows make a Python run's curve (none for a tether run's)."""
    rows = read_rows(run_dir)
    key = "validation_accuracy" if any("validation_accuracy" in r for r in rows) else "test_accuracy"
    return sorted({r["worker"] for r in rows if "worker" in r and r.get(key) is not None})


def mean_band(curves, x_key, y_key):
    """Seeds' curves on a common x grid (where all have data): x, mean, sd (None for one seed)."""
    if len(curves) == 1:
        rows = curves[0]
        return [r[x_key] for r in rows], [100 * r[y_key] for r in rows], None
    # Where every seed has data: old runs (no t = 0 evaluation) start at their first evaluation.
    xs = np.linspace(max(rows[0][x_key] for rows in curves), min(rows[-1][x_key] for rows in curves), 200)
    ys = np.array([np.interp(xs, [r[x_key] for r in rows], [100 * r[y_key] for r in rows]) for rows in curves])
    return xs, ys.mean(axis=0), ys.std(axis=0, ddof=1)


def finish(fig, ax, title, path, written):
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)


def plot_curves(groups, strategies, title, out_dir):
    """groups: {line label: [run dirs (seeds), or (run dir, worker)]}; accuracy over time and over samples."""
    written = []
    curves = {line: [read_curve(d) for d in dirs] for line, dirs in groups.items()}
    keys = {key for seeds in curves.values() for _, key in seeds}
    y_label = " / ".join(sorted(f"{set_name(k)} accuracy (%)" for k in keys))
    colours = colour_lines(strategies)
    seeds = max(len(dirs) for dirs in groups.values())
    # The t = 0 points (about 1 / classes) would squash the range where runs differ: the axis
    # starts a little under the lowest later point, and says where t = 0 lies.
    initial = [rows[0][key] for runs in curves.values() for rows, key in runs if rows and rows[0]["samples"] == 0]
    later = [r[key] for runs in curves.values() for rows, key in runs for r in rows if r["samples"] > 0]
    floor = max(0.0, 100 * min(later) - 2) if later else 0.0
    for x_key, x_label, name in [("wall_seconds", "wall time (s)", "accuracy_over_time.png"),
                                 ("samples", "training samples (all workers)", "accuracy_over_samples.png")]:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for line, runs in curves.items():
            if any(len(rows) < 2 for rows, _ in runs):
                continue  # a run with one evaluation has no curve to draw
            y_key = runs[0][1]
            xs, mean, sd = mean_band([rows for rows, _ in runs], x_key, y_key)
            ax.plot(xs, mean, color=colours[line], label=line, marker=None if sd is not None else ".")
            if sd is not None:
                ax.fill_between(xs, mean - sd, mean + sd, color=colours[line], alpha=0.2, linewidth=0)
        if initial and 100 * max(initial) < floor:
            ax.set_ylim(floor, min(100.0, 100 * max(later) + 1))
            ax.annotate(f"curves start at t = 0 from {100 * min(initial):.1f}–{100 * max(initial):.1f}%, below the axis",
                        (0.01, 0.02), xycoords="axes fraction", fontsize=8, color="0.35")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label + (f" (mean ± sd over {seeds} seeds)" if seeds > 1 else ""))
        finish(fig, ax, title, Path(out_dir) / name, written)
    return written


def plot_runs(run_dirs, out_dir):
    """One line per run directory."""
    groups, strategies = {}, {}
    for d in run_dirs:
        summary = read_json(Path(d) / "summary.json")
        parts = [summary.get("strategy", "")]
        if summary.get("workers", 1) != 1:
            parts.append(f"N={summary['workers']}")
        if summary.get("communication_window"):
            parts.append(f"τ={summary['communication_window']}")
        line = " ".join(p for p in parts if p) or Path(d).name
        # A Python run in which several workers logged the curve: one line per worker.
        workers = curve_workers(d)
        sources = [(f"{line} worker {w}", (d, w)) for w in workers] if len(workers) > 1 else [(line, d)]
        for line, source in sources:
            while line in groups:
                line += "'"
            groups[line], strategies[line] = [source], summary.get("strategy", "")
    return plot_curves(groups, strategies, common_title(run_dirs), out_dir)


def numeric(value):
    try:
        return float(value)
    except ValueError:
        return None


def plot_sweep(sweep_dir, out_dir):
    """Figures against each numeric grid key, bars when none varies, and the curves."""
    sweep_dir = Path(sweep_dir)
    rows = list(csv.DictReader((sweep_dir / "summary.csv").open()))
    if not rows:
        sys.exit(f"{sweep_dir}/summary.csv has no runs")
    columns = list(rows[0])
    keys = columns[:columns.index("repeat")]  # the sweep's grid keys come first
    rows = [r for r in rows if r["status"] != "missing" and "(reference)" not in r.values()]
    for r in rows:
        r["strategy"] = strategy_of(r, sweep_dir)  # colours follow it, grid key or not
    varied = [k for k in keys if len({r[k] for r in rows}) > 1]
    first_run = sweep_dir / rows[0]["run"]
    title = common_title([sweep_dir / r["run"] for r in rows])
    target = read_json(first_run / "config.json").get("eval", {}).get("target_accuracy")
    set_label = "validation" if any(r.get("best_validation_accuracy") for r in rows) else "test"
    figures = [("final_test_accuracy", "final test accuracy (%)", 100),
               ("best_validation_accuracy", "best validation accuracy (%)", 100),
               ("time_to_target", f"time to {100 * target:g}% {set_label} accuracy (s)" if target else "time to target (s)", 1)]
    figures = [f for f in figures if f[0] in columns and any(r[f[0]] for r in rows)]
    written = []
    numeric_keys = [k for k in varied if all(numeric(r[k]) is not None for r in rows)]
    for x_key in numeric_keys:
        others = [k for k in varied if k != x_key]
        for y_key, y_label, scale in figures:
            written += plot_against(rows, x_key, others, y_key, y_label, scale, title, out_dir)
    if not numeric_keys:
        written += plot_categories(rows, varied, figures, title, out_dir)
    groups, strategies = defaultdict(list), {}
    for r in rows:
        if (sweep_dir / r["run"] / "metrics.jsonl").is_file():
            line = point_label(r, varied)
            groups[line].append(sweep_dir / r["run"])
            strategies[line] = r["strategy"]
    if groups:
        written += plot_curves(groups, strategies, title, out_dir)
    return written


def strategy_of(row, sweep_dir):
    return row.get("strategy.name") or read_json(sweep_dir / row["run"] / "summary.json").get("strategy", "")


def plot_against(rows, x_key, others, y_key, y_label, scale, title, out_dir):
    """y against a numeric key: one line per value of the other varied keys, mean ± sd over
    seeds; points where some seeds have no value (target never reached) are marked, not dropped."""
    series, missing, strategies = defaultdict(lambda: defaultdict(list)), defaultdict(int), {}
    for r in rows:
        line = point_label(r, others) if others else y_label
        strategies[line] = r["strategy"]
        if r[y_key] == "":
            missing[line] += 1
        else:
            series[line][numeric(r[x_key])].append(scale * float(r[y_key]))
    colours = colour_lines(strategies)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for line in strategies:
        points = series[line]
        xs = sorted(points)
        means = np.array([statistics.mean(points[x]) for x in xs])
        sds = np.array([statistics.stdev(points[x]) if len(points[x]) > 1 else 0.0 for x in xs])
        name = line if others else None
        if missing[line]:
            runs = f"{missing[line]} run{'s' if missing[line] > 1 else ''}"
            why = f"target not reached in {runs}" if y_key == "time_to_target" else f"{runs} without a value"
            name = f"{line if others else ''} ({why})".strip()
        ax.plot(xs, means, marker="o", color=colours[line], label=name)
        if sds.any():
            ax.fill_between(xs, means - sds, means + sds, color=colours[line], alpha=0.2, linewidth=0)
    seeds = max((len(v) for p in series.values() for v in p.values()), default=1)
    ax.set_xlabel(label(x_key))
    ax.set_ylabel(y_label + (f"\n(mean ± sd over {seeds} seeds)" if seeds > 1 else ""))
    xs = sorted({numeric(r[x_key]) for r in rows})
    if len(xs) > 2 and xs[0] > 0 and xs[-1] > 8 * xs[0]:
        ax.set_xscale("log", base=2)  # windows and worker counts double
    if len(xs) <= 12:
        ax.set_xticks(xs, [f"{x:g}" for x in xs])  # the grid's own values, not 1.5 workers
    written = []
    finish(fig, ax, title, Path(out_dir) / f"{y_key}_vs_{x_key.replace('.', '_')}.png", written)
    return written


def plot_categories(rows, varied, figures, title, out_dir):
    """No numeric key varies (e.g. strategies side by side): bars of the mean ± sd, every seed a
    dot; a run with no value (target never reached) is said above its bar, never dropped."""
    written = []
    for y_key, y_label, scale in figures:
        groups, missing, strategies = defaultdict(list), defaultdict(int), {}
        for r in rows:
            line = point_label(r, varied)
            strategies[line] = r["strategy"]
            if r[y_key] == "":
                missing[line] += 1
            else:
                groups[line].append(scale * float(r[y_key]))
        labels, colours = list(strategies), colour_lines(strategies)
        means = [statistics.mean(groups[g]) if groups[g] else 0.0 for g in labels]
        sds = [statistics.stdev(groups[g]) if len(groups[g]) > 1 else 0.0 for g in labels]
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        ax.bar(labels, means, yerr=sds, capsize=4, color=[colours[g] for g in labels], alpha=0.8)
        for i, g in enumerate(labels):
            ax.plot([i] * len(groups[g]), groups[g], "k.", markersize=7)
            if missing[g]:
                word = "reached" if y_key == "time_to_target" else "with a value"
                note = f"none {word}" if not groups[g] else f"{len(groups[g])} of {len(groups[g]) + missing[g]} {word}"
                ax.annotate(note, (i, means[i] + sds[i]), xytext=(0, 4), textcoords="offset points", ha="center",
                            fontsize=8)
        seeds = max(len(groups[g]) + missing[g] for g in labels)
        ax.set_ylabel(y_label + (f"\n(bars: mean ± sd; dots: {seeds} seeds)" if seeds > 1 else ""))
        values = [v for g in labels for v in groups[g]]
        if scale == 100 and values:
            ax.set_ylim(min(values) - 3, max(values) + 1)
        ax.tick_params(axis="x", labelrotation=20)
        finish(fig, ax, title, Path(out_dir) / f"{y_key}_by_run.png", written)
    return written


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", type=Path, help="run directories, or one sweep directory")
    p.add_argument("--out", type=Path, help="where to write the PNGs (default: the first directory)")
    args = p.parse_args()
    out_dir = args.out or args.dirs[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    if len(args.dirs) == 1 and (args.dirs[0] / "summary.csv").is_file():
        written = plot_sweep(args.dirs[0], out_dir)
    else:
        written = plot_runs(args.dirs, out_dir)
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
