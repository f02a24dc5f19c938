#!/usr/bin/python3
"""Figures from tether run and sweep directories (matplotlib, Debian's python3-matplotlib).

    /usr/bin/python3 experiments/plot.py RUN_DIR [RUN_DIR...]   accuracy over time and over samples
    /usr/bin/python3 experiments/plot.py SWEEP_DIR              comparison figures of a sweep

A run directory holds metrics.jsonl; a sweep directory holds summary.csv and one run
directory per run. PNGs are written into the directory given (or --out DIR) and listed.
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


def read_metrics(run_dir):
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        sys.exit(f"{path}: not found; is {run_dir} a tether run directory?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["wall_seconds"])


def label_of(run_dir):
    summary = Path(run_dir) / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        parts = [s.get("strategy", "")]
        if s.get("workers", 1) != 1:
            parts.append(f"N={s['workers']}")
        if s.get("communication_window"):
            parts.append(f"τ={s['communication_window']}")
        return " ".join(p for p in parts if p) or Path(run_dir).name
    return Path(run_dir).name


def plot_runs(run_dirs, out_dir):
    """Test accuracy against wall time and against training samples, one line per run."""
    written = []
    for x_key, x_label, name in [("wall_seconds", "wall time (s)", "accuracy_over_time.png"),
                                 ("samples", "training samples (all workers)", "accuracy_over_samples.png")]:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for run_dir in run_dirs:
            rows = read_metrics(run_dir)
            ax.plot([r[x_key] for r in rows], [100 * r["test_accuracy"] for r in rows], marker=".",
                    label=label_of(run_dir))
        ax.set_xlabel(x_label)
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(out_dir) / name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def short(key):
    """strategy.name -> strategy, cluster.workers -> workers: legend labels that read well."""
    parts = key.split(".")
    return parts[-2] if parts[-1] == "name" and len(parts) > 1 else parts[-1]


def numeric(value):
    try:
        return float(value)
    except ValueError:
        return None


def plot_sweep(sweep_dir, out_dir):
    """Final accuracy against each numeric grid key, one line per value of the other keys."""
    rows = list(csv.DictReader((Path(sweep_dir) / "summary.csv").open()))
    if not rows:
        sys.exit(f"{sweep_dir}/summary.csv has no runs")
    fixed = {"repeat", "final_test_accuracy", "best_test_accuracy", "wall_seconds", "time_to_target",
             "bytes_sent", "mean_staleness", "temporal_efficiency", "status", "run"}
    keys = [k for k in rows[0] if k not in fixed]
    rows = [r for r in rows if r["status"] != "missing" and "(reference)" not in r.values()]
    written = []
    varied = [k for k in keys if len({r[k] for r in rows}) > 1]
    for x_key in varied:
        if not all(numeric(r[x_key]) is not None for r in rows):
            continue
        others = [k for k in varied if k != x_key]
        for y_key, y_label in [("final_test_accuracy", "final test accuracy (%)"),
                               ("time_to_target", "time to target accuracy (s)")]:
            series = defaultdict(lambda: defaultdict(list))  # line label -> x -> [y over repeats]
            for r in rows:
                if r[y_key] == "":
                    continue
                line = ", ".join(f"{short(k)}={r[k]}" for k in others) or y_key
                scale = 100 if y_key == "final_test_accuracy" else 1
                series[line][numeric(r[x_key])].append(scale * float(r[y_key]))
            if not series:
                continue
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for line, points in sorted(series.items()):
                xs = sorted(points)
                ax.plot(xs, [statistics.mean(points[x]) for x in xs], marker="o", label=line)
            ax.set_xlabel(x_key)
            ax.set_ylabel(y_label + (" (mean over repeats)" if any(len(v) > 1 for p in series.values() for v in p.values()) else ""))
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            path = Path(out_dir) / f"{y_key}_vs_{x_key.replace('.', '_')}.png"
            fig.savefig(path, dpi=120)
            plt.close(fig)
            written.append(path)
    if not any(all(numeric(r[k]) is not None for r in rows) for k in varied):
        written += plot_categories(rows, varied, out_dir)
    run_dirs = [Path(sweep_dir) / r["run"] for r in rows if (Path(sweep_dir) / r["run"] / "metrics.jsonl").is_file()]
    if run_dirs:
        written += plot_runs(run_dirs, out_dir)
    return written


def plot_categories(rows, varied, out_dir):
    """No numeric key varies (e.g. strategies side by side): bars of the mean over repeats."""
    written = []
    for y_key, y_label, scale in [("final_test_accuracy", "final test accuracy (%)", 100),
                                  ("time_to_target", "time to target accuracy (s)", 1)]:
        groups = defaultdict(list)
        for r in rows:
            if r[y_key] != "":
                groups[", ".join(f"{short(k)}={r[k]}" for k in varied)].append(scale * float(r[y_key]))
        if not groups:
            continue
        labels = list(groups)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        means = [statistics.mean(groups[g]) for g in labels]
        ax.bar(labels, means, color="tab:blue", alpha=0.7)
        for i, g in enumerate(labels):  # every repeat as a dot over its bar
            ax.plot([i] * len(groups[g]), groups[g], "k.", markersize=8)
        ax.set_ylabel(y_label + (" (bars: mean; dots: repeats)" if any(len(v) > 1 for v in groups.values()) else ""))
        if y_key == "final_test_accuracy":
            ax.set_ylim(min(means) - 3, max(max(v) for v in groups.values()) + 1)
        ax.tick_params(axis="x", labelrotation=20)
        ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        path = Path(out_dir) / f"{y_key}_by_run.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
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
