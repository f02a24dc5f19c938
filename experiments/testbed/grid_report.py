#!/usr/bin/python3
"""The time-to-accuracy table and figure of a testbed grid (specs/grid_tether.json,
specs/grid_ddp.json): one row per configuration and link rate over its seeds, mean and 95%
confidence half-width (Student's t), and the speed-up against DDP at the same rate.

    experiments/testbed/grid_report.py RESULTS... [--figure PATH] [--csv PATH] [--seeds-csv PATH] [--ratio A/B]...

RESULTS are testbed output directories (OUT/cells/NAME,rate_mbit=R,seed=S/result.json). A
configuration is the cell name before its grid suffix. tether's time to target is read off the
center's evaluations every second of wall time (run/summary.json's time_to_target, the
workers' join included); DDP's off rank 0's evaluations every second of training (its
evaluations excluded). A seed that did not reach the target counts as not reached, and the row
says how many did. `--ratio A/B` (configurations, e.g. `ddp-2ep/diloco50-int8`) gives, per rate,
the per-seed ratios of the time to target (over the seeds both reached, saying how many pairs
that left), of the final validation accuracy and of the final validation loss (over the seeds
both finished), each as a geometric mean with a 95% interval of the mean log ratio: a ratio's
own interval, not one built from each side's. `--seeds-csv` writes every run's own figures. Run
from the repository root with PYTHONPATH=experiments:examples/python (experiments/README.md).
"""

import argparse
import collections
import csv
import glob
import json
import math
import os

from tetherlab.stats import interval, ratio_interval

# What each configuration is, for the table (the cell names of the specs).
LABELS = {
    "ddp": "PyTorch DDP (gloo), sync., every step",
    "ddp-tuned": "PyTorch DDP (gloo), every step, its rate tuned",
    "ddp-tuned-1.7ep": "PyTorch DDP (gloo), its rate tuned, 1.7 epochs",
    "ddp-2ep": "PyTorch DDP (gloo), sync., every step, stopped at 2 epochs",
    "torchft-diloco50": "torchft DiLoCo H=50 (gloo all-reduce, float32)",
    "sync": "tether averaging τ=1 (sync. SGD)",
    "adag5": "tether adag τ=5",
    "adag5-int8": "tether adag τ=5, int8",
    "aeasgd10": "tether aeasgd τ=10",
    "diloco10": "tether diloco H=10",
    "diloco50": "tether diloco H=50",
    "diloco50-int8": "tether diloco H=50, int8",
    "cnn-ddp": "CNN: PyTorch DDP (gloo)",
    "cnn-diloco50-int8": "CNN: tether diloco H=50, int8",
    "diloco50-int4": "tether diloco H=50, int4",
    "stream50-f5-d0-int8": "tether streaming diloco H=50, 5 fragments, int8",
    "stream50-f5-d5": "tether streaming diloco H=50, 5 fragments, d=5",
    "stream50-f5-d5-int8": "tether streaming diloco H=50, 5 fragments, d=5, int8",
    "stream50-f5-d5-int4": "tether streaming diloco H=50, 5 fragments, d=5, int4",
    "cnn-stream50-f5-d0-int8": "CNN: tether streaming diloco H=50, 5 fragments, int8",
    "cnn-stream50-f5-d10-int8": "CNN: tether streaming diloco H=50, 5 fragments, d=10, int8",
}


def configs(cells):
    """The configurations in `cells`: those of LABELS in its order, then any other by name (a
    spec's new cell is listed under its own name, never left out)."""
    present = {name for name, _ in cells}
    return [c for c in LABELS if c in present] + sorted(present - set(LABELS))


def load(directories):
    """[{config, rate, seed, ...}] of every finished cell."""
    rows = []
    for directory in directories:
        for path in glob.glob(os.path.join(directory, "cells", "*", "result.json")):
            with open(path) as f:
                result = json.load(f)
            name = result["cell"]["name"]
            parts = dict(p.split("=", 1) for p in name.split(",")[1:])
            collected = result.get("collected", {})
            summary = collected.get("run/summary.json") or collected.get("ddp.json")
            row = {"config": name.split(",")[0], "rate": float(parts["rate_mbit"]), "seed": int(parts["seed"]),
                   "status": result.get("status"),
                   "selfcheck": [c["relative_error"] for c in result.get("selfcheck", [])
                                 if c.get("relative_error") is not None]}
            if result.get("status") == "ok" and summary:
                row["curve"] = curve_of(os.path.dirname(path), summary)
                workers = [p["host"] for p in result["processes"] if p["host"].startswith("w")]
                traffic = result.get("link_bytes", {})
                shares = [(max(t["sent"], t["received"]) * 8 / (result["cell"]["links"][h]["rate_mbit"] * 1e6 * result["seconds"]), h)
                          for h, t in traffic.items() if result["cell"]["links"][h]["rate_mbit"] and result.get("seconds")]
                row["busiest"] = max(shares) if shares else (math.nan, "-")
                row.update(time_to_target=summary.get("time_to_target"),
                           seconds=summary.get("training_seconds") or summary.get("wall_seconds"),
                           validation=summary.get("final_validation_accuracy"), test=summary.get("final_test_accuracy"),
                           loss=summary.get("final_validation_loss"),
                           link_mb=sum(traffic[h]["sent"] + traffic[h]["received"] for h in workers) / len(workers) / 1e6,
                           target=summary.get("target_accuracy") or summary.get("eval_target_accuracy"))
            rows.append(row)
    return rows


# The wall-clock budget per link rate for "accuracy at a fixed budget": about half DDP's time to
# the target there, so that the budget separates the configurations.
BUDGETS = {1000: 5.0, 100: 20.0, 10: 150.0}


def curve_of(cell_dir, summary):
    """[(seconds, validation accuracy)] of a run: the center's evaluations (metrics.jsonl,
    training_seconds: wall time since the workers started) or DDP rank 0's (training time)."""
    if "curve" in summary:
        return [(c["seconds"], c["validation_accuracy"]) for c in summary["curve"]]
    rows = []
    with open(os.path.join(cell_dir, "run", "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("validation_accuracy") is not None:
                rows.append((r["training_seconds"], r["validation_accuracy"]))
    return rows


def at_budget(curve, budget):
    """The validation accuracy of the last evaluation at or before `budget` seconds."""
    seen = [a for t, a in curve if t <= budget]
    return seen[-1] if seen else None


def summarize(rows):
    """{(config, rate): figures over its seeds}."""
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["config"], r["rate"])].append(r)
    out = {}
    for key, runs in groups.items():
        ok = [r for r in runs if r["status"] == "ok"]
        reached = [r["time_to_target"] for r in ok if r.get("time_to_target") is not None]
        figures = {"runs": len(runs), "ok": len(ok), "reached": len(reached)}
        for name, values in (("ttt", reached), ("seconds", [r["seconds"] for r in ok]),
                             ("validation", [r["validation"] for r in ok]), ("test", [r["test"] for r in ok]),
                             ("link_mb", [r["link_mb"] for r in ok]),
                             ("busiest", [r["busiest"][0] for r in ok]),
                             ("budget", [a for a in (at_budget(r["curve"], BUDGETS.get(int(r["rate"]), math.inf))
                                                     for r in ok) if a is not None])):
            figures[name] = interval(values) if values else (math.nan, math.nan, math.nan)
        figures["busiest_host"] = collections.Counter(r["busiest"][1] for r in ok).most_common(1)[0][0] if ok else "-"
        out[key] = figures
    return out


def text(mean_half, digits, scale=1.0):
    mean, half = mean_half[0] * scale, mean_half[1] * scale
    if math.isnan(mean):
        return "-"
    return f"{mean:.{digits}f}" + ("" if math.isnan(half) else f" ± {half:.{digits}f}")


def table(cells):
    lines = ["| link per host | run | seeds reaching target | time to target (s) | vs DDP | run time (s) | "
             "val. acc. at budget (%) | final val. acc. (%) | test acc. (%) | link MB/worker | fewer bytes than DDP | "
             "busiest link (share of its rate) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rate in sorted({r for _, r in cells}, reverse=True):
        for config in configs(cells):
            # DDP at tether's rate: the whole run, or ddp-2ep, stopped at 2 epochs (rerun_10mbit.sh).
            ddp = cells.get(("cnn-ddp" if config.startswith("cnn-") else "ddp", rate)) or cells.get(("ddp-2ep", rate))
            c = cells.get((config, rate))
            if not c:
                continue
            speedup = "-"
            if ddp and c["reached"] and ddp["reached"]:
                speedup = f"{ddp['ttt'][0] / c['ttt'][0]:.2f}x"
            fewer = f"{ddp['link_mb'][0] / c['link_mb'][0]:.0f}x" if ddp and not config.endswith("ddp") else "-"
            budget = BUDGETS.get(int(rate))
            lines.append(f"| {rate:g} Mbit/s | {LABELS.get(config, config)} | {c['reached']} of {c['runs']} | {text(c['ttt'], 1)} | "
                         f"{speedup} | {text(c['seconds'], 1)} | "
                         f"{text(c['budget'], 2, 100) + (f' ({budget:g} s)' if budget else '')} | "
                         f"{text(c['validation'], 2, 100)} | {text(c['test'], 2, 100)} | {text(c['link_mb'], 0)} | {fewer} | "
                         f"{c['busiest_host']} {text(c['busiest'], 0, 100)}% |")
    return "\n".join(lines)


def selfcheck_text(rows):
    """Per rate: how far the measured link rates were from the set ones, over every link
    direction measured before every cell (the last attempt of each)."""
    lines = []
    for rate in sorted({r["rate"] for r in rows}, reverse=True):
        errors = [e for r in rows if r["rate"] == rate for e in r["selfcheck"]]
        if errors:
            lines.append(f"- {rate:g} Mbit/s: {len(errors)} link directions over "
                         f"{sum(1 for r in rows if r['rate'] == rate)} cells measured "
                         f"{min(errors):+.1%} .. {max(errors):+.1%} of the set rate")
    return "\n".join(lines)


def figure(cells, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    for config in configs(cells):
        label = LABELS.get(config, config)
        if config.startswith("cnn-"):
            continue  # one rate only: in the table
        points = sorted((rate, c["ttt"]) for (name, rate), c in cells.items() if name == config and c["reached"])
        if not points:
            continue
        rates = [p[0] for p in points]
        means = [p[1][0] for p in points]
        halves = [0 if math.isnan(p[1][1]) else p[1][1] for p in points]
        ax.errorbar(rates, means, yerr=halves, marker="o", capsize=3,
                    linestyle="--" if config == "ddp" else "-", color="black" if config == "ddp" else None, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("link rate per host (Mbit/s)")
    ax.set_ylabel("time to target validation accuracy (s)")
    ax.set_title("Fashion-MNIST MLP, 4 workers + center on shaped links (mean, 95% CI)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def ratios(rows, a, b):
    """{rate: {figure: (ratio_interval's tuple or None, pairs)}} of configurations
    a / b paired by seed, for the time to target, the final validation accuracy and loss; a pair
    is used where both sides have a positive figure."""
    runs = {(r["config"], r["rate"], r["seed"]): r for r in rows if r["status"] == "ok"}
    out = {}
    for rate in sorted({r["rate"] for r in rows}, reverse=True):
        seeds = sorted(s for (c, q, s) in runs if c == a and q == rate and (b, rate, s) in runs)
        pairs = [(runs[(a, rate, s)], runs[(b, rate, s)]) for s in seeds]
        if pairs:
            out[rate] = {}
            for figure, key in (("time to target", "time_to_target"), ("final validation accuracy", "validation"),
                                ("final validation loss", "loss")):
                used = [(x[key], y[key]) for x, y in pairs if (x.get(key) or 0) > 0 and (y.get(key) or 0) > 0]
                out[rate][figure] = (ratio_interval(used), len(pairs))
    return out


def ratio_text(figure, digits):
    r, pairs = figure
    if r is None:
        return f"- (0 of {pairs} seeds)"
    if math.isnan(r[1]):
        return f"{r[0]:.{digits}f} (1 of {pairs} seeds)"
    return f"{r[0]:.{digits}f} [{r[1]:.{digits}f}, {r[2]:.{digits}f}] ({r[3]} of {pairs} seeds)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--figure")
    parser.add_argument("--csv")
    parser.add_argument("--seeds-csv", help="one row per run: configuration, rate, seed and its figures")
    parser.add_argument("--ratio", action="append", default=[], help="CONFIG_A/CONFIG_B, e.g. ddp-2ep/diloco50-int8")
    args = parser.parse_args(argv)
    rows = load(args.results)
    cells = summarize(rows)
    print(table(cells))
    print()
    print("Self-check of the shaped links:")
    print(selfcheck_text(rows))
    for spec in args.ratio:
        a, sep, b = spec.partition("/")
        if not sep or not a or not b:
            parser.error(f"--ratio {spec!r}: give two configurations as A/B, e.g. ddp-2ep/diloco50-int8")
        known = {r["config"] for r in rows}
        for name in (a, b):
            if name not in known:
                parser.error(f"--ratio {spec!r}: no configuration {name!r} in the results (there are: {', '.join(sorted(known))})")
        print(f"\n{a} / {b}, per seed (geometric mean [95% interval]):")
        for rate, figures in ratios(rows, a, b).items():
            print(f"- {rate:g} Mbit/s: " + "; ".join(f"{name} {ratio_text(f, 3 if name == 'time to target' else 4)}"
                                                    for name, f in figures.items()))
    if args.seeds_csv:
        with open(args.seeds_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["config", "rate_mbit", "seed", "status", "time_to_target", "run_seconds", "final_validation",
                        "final_validation_loss", "test", "link_mb_per_worker"])
            for r in sorted(rows, key=lambda r: (r["config"], -r["rate"], r["seed"])):
                ttt = r.get("time_to_target")
                w.writerow([r["config"], r["rate"], r["seed"], r["status"], "" if ttt is None else round(ttt, 3),
                            round(r["seconds"], 3) if r.get("seconds") else "", r.get("validation", ""), r.get("loss", ""),
                            r.get("test", ""),
                            round(r["link_mb"], 2) if r.get("link_mb") else ""])
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["config", "rate_mbit", "runs", "reached", "time_to_target_mean", "time_to_target_ci95",
                        "run_seconds_mean", "final_validation_mean", "final_validation_ci95", "test_mean", "test_ci95",
                        "link_mb_per_worker"])
            for (config, rate), c in sorted(cells.items()):
                w.writerow([config, rate, c["runs"], c["reached"], *c["ttt"][:2], c["seconds"][0], *c["validation"][:2],
                            *c["test"][:2], c["link_mb"][0]])
    if args.figure:
        figure(cells, args.figure)


if __name__ == "__main__":
    main()
