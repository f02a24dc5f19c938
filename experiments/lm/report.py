#!/usr/bin/python3
"""The language-model grid's tables and figure (experiments/lm/specs/lm_*.json): per method
and link rate over its seeds, the time to a target validation loss, the final loss, the loss at a
fixed training-time budget, the bytes on the busiest link and the share of time spent computing;
then the ratios of chosen methods per seed, with 95% confidence intervals.

    experiments/lm/report.py runs/testbed/lm_ddp runs/testbed/lm_torchft runs/testbed/lm_tether \\
        [--target NATS] [--budget-s S] [--figure PATH] [--csv PATH] [--ratio A/B]...

A method is the spec's peer (ddp, torchft, tether: the results directory's name after "lm_")
and the cell's name before its grid suffix, e.g. "torchft diloco-h50". Times are rank 0's
training seconds (its evaluations excluded, language_model.py's clock), read off evaluations
every 50 steps and interpolated linearly between the two around the target. The target
defaults to the highest of the lowest losses the curves at 1000 Mbit/s reached (every run of
every method that ran there), rounded up to 0.01 nats: a loss every run reached on the fast link.
A time's mean is over the seeds that reached the target ("reached" says how many); a ratio
counts the seeds both methods reached it in. The compute share is the time the
same steps take with nothing sent (the compute-only cell: 4 ranks training alone on the same
hosts) over rank 0's training time (above 100% where rank 0 computed faster than in that cell:
an asynchronous run's rank 0, beside the center, while the others wait on their links). "last
rank ends" is the wall time from the programs' start to the last rank's exit, start-up and final
evaluation included: where rank 0 finishes first, the run is not over. The busiest link is the host whose sent + received
bytes are largest (its eth0 counters while the programs ran, headers included). A ratio A/B is
taken per seed (seed s of A against seed s of B) and its 95% interval is Student's t on the
logarithms, so it is a ratio's interval, not one of each side. Run from the repository root with
PYTHONPATH=experiments:examples/python (experiments/README.md).
"""
import argparse
import collections
import csv
import glob
import json
import math
import re
import os
import statistics

from tetherlab.stats import interval, ratio_interval


def load(dirs):
    """{(method, rate): {seed: row}} of every cell that ran to its end."""
    cells = collections.defaultdict(dict)
    skipped = []
    for d in dirs:
        peer = os.path.basename(os.path.normpath(d)).removeprefix("lm_")
        for path in sorted(glob.glob(os.path.join(d, "cells", "*", "result.json"))):
            with open(path) as f:
                result = json.load(f)
            name = os.path.basename(os.path.dirname(path))
            parts = dict(p.split("=", 1) for p in name.split(",")[1:])
            summary = result.get("collected", {}).get("lm.json", {})
            if result.get("status") != "ok" or "curve" not in summary:
                skipped.append(f"{peer} {name}: {result.get('status')}")
                continue
            cell = name.split(",")[0]
            method = peer if cell == peer else f"{peer} {cell}"
            rate = parts.get("rate_mbit", "unshaped")
            links = result.get("link_bytes", {})
            busiest = max(links.items(), key=lambda kv: kv[1]["sent"] + kv[1]["received"]) if links else (None, None)
            cells[(method, rate)][int(parts.get("seed", 1))] = {
                "curve": summary["curve"], "final": summary["final_validation_loss"],
                "training_seconds": summary["training_seconds"],
                "steps": summary["curve"][-1]["step"], "planned_steps": summary["config"]["steps"],
                "busiest_host": busiest[0],
                # When the last rank ended (wall time from the programs' start, start-up and final
                # evaluation included): an asynchronous run's rank 0 may finish long before it.
                "last_rank_s": max((p["seconds"] or 0) for p in result.get("processes", [{"seconds": 0}])),
                "busiest_mb": (busiest[1]["sent"] + busiest[1]["received"]) / 1e6 if busiest[1] else float("nan"),
                "busiest_sent_mb": busiest[1]["sent"] / 1e6 if busiest[1] else float("nan"),
                "busiest_received_mb": busiest[1]["received"] / 1e6 if busiest[1] else float("nan")}
    return cells, skipped


def time_to(curve, target):
    """Training seconds at which the curve first reaches `target`, interpolated; None if never."""
    for a, b in zip(curve, curve[1:]):
        if b["validation_loss"] <= target:
            if a["validation_loss"] <= target:
                return a["seconds"]
            f = (a["validation_loss"] - target) / (a["validation_loss"] - b["validation_loss"])
            return a["seconds"] + f * (b["seconds"] - a["seconds"])
    return None


def loss_at(curve, seconds):
    """The loss of the last evaluation at or before `seconds` of training."""
    before = [p for p in curve if p["seconds"] <= seconds]
    return before[-1]["validation_loss"] if before else float("nan")


def fmt(values, digits=1):
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return "-"
    mean, half, _ = interval(values)
    return f"{mean:.{digits}f}" + ("" if math.isnan(half) else f" ± {half:.{digits}f}")


def ratio(cells, a, b, rate, key):
    """Per-seed ratios key(a) / key(b) at `rate` over the seeds both have: (geometric mean,
    low, high, count)."""
    sa, sb = cells.get((a, rate), {}), cells.get((b, rate), {})
    return ratio_interval([(key(sa[s]), key(sb[s])) for s in sorted(set(sa) & set(sb))
                           if key(sa[s]) is not None and key(sb[s]) is not None])


def figure(cells, rates, path, target):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    methods = sorted({m for m, _ in cells if not m.endswith("compute-only")})
    fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), sharey=True, squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, rate in zip(axes[0], rates):
        for k, m in enumerate(methods):
            seeds = cells.get((m, rate))
            if not seeds:
                continue
            end = max(r["curve"][-1]["seconds"] for r in seeds.values())
            grid = np.linspace(0, end, 200)
            ys = np.array([np.interp(grid, [p["seconds"] for p in r["curve"]],
                                     [p["validation_loss"] for p in r["curve"]], right=np.nan)
                           for r in seeds.values()])
            colour = colours[k % len(colours)]
            ax.plot(grid, np.nanmean(ys, axis=0), color=colour, label=f"{m} ({len(seeds)})",
                    linestyle="--" if m.startswith("torchft") else ":" if m.startswith("ddp") else "-")
            if len(seeds) > 1:
                ax.fill_between(grid, np.nanmin(ys, axis=0), np.nanmax(ys, axis=0), color=colour, alpha=0.15)
        ax.axhline(target, color="grey", linewidth=0.8)
        ax.set_title(f"{rate} Mbit/s per host" if rate != "unshaped" else "unshaped")
        ax.set_xlabel("rank 0's training time (s)")
        ax.set_ylim(1.4, 2.6)
    axes[0][0].set_ylabel("validation loss (nats/token)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+")
    p.add_argument("--target", type=float)
    p.add_argument("--budget-s", type=float, default=120.0)
    p.add_argument("--figure")
    p.add_argument("--csv")
    p.add_argument("--ratio", action="append", default=[], help="METHOD_A/METHOD_B, e.g. 'tether diloco-h50/torchft diloco-h50'")
    p.add_argument("--only", help="a regular expression: the table and figure show only the methods it matches "
                                  "(give --target too: the default target reads every 1 Gbit/s cell)")
    args = p.parse_args()
    cells, skipped = load(args.results)
    if args.only:
        cells = {k: v for k, v in cells.items() if re.search(args.only, k[0]) or k[0].endswith("compute-only")}
    rates = sorted({r for _, r in cells}, key=lambda r: -float(r) if r != "unshaped" else -1e9)
    compute = [r["training_seconds"] / r["steps"] for (m, _), seeds in cells.items() if m.endswith("compute-only")
               for r in seeds.values()]
    per_step = statistics.mean(compute) if compute else None
    target = args.target
    if target is None:
        fast = [min(p["validation_loss"] for p in r["curve"]) for (m, rate), seeds in cells.items()
                if rate == "1000" and not m.endswith("compute-only") for r in seeds.values()]
        target = math.ceil(max(fast) * 100) / 100 if fast else 2.0
    print(f"target {target:.2f} nats/token; budget {args.budget_s:g} s; compute alone "
          f"{per_step * 1000:.1f} ms a step" if per_step else f"target {target:.2f}; no compute-only cell")
    print("\n| link | method | seeds | time to target (s) | reached | final loss | loss at budget | busiest link MB "
          "(sent + received) | compute share | last rank ends (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for rate in rates:
        for (m, r), seeds in sorted(cells.items()):
            if r != rate or m.endswith("compute-only"):
                continue
            runs = list(seeds.values())
            times = [time_to(x["curve"], target) for x in runs]
            shares = [per_step * x["steps"] / x["training_seconds"] for x in runs] if per_step else []
            row = {"rate_mbit": rate, "method": m, "seeds": len(runs),
                   "time_to_target": fmt([t for t in times if t is not None]),
                   "reached": f"{sum(t is not None for t in times)}/{len(runs)}",
                   "final_loss": fmt([x["final"] for x in runs], 3),
                   "loss_at_budget": fmt([loss_at(x["curve"], args.budget_s) for x in runs], 3),
                   "busiest_mb": fmt([x["busiest_mb"] for x in runs], 0) + f" ({runs[0]['busiest_host']})",
                   "compute_share": fmt([100 * s for s in shares], 0) + "%" if shares else "-",
                   "last_rank_s": fmt([x["last_rank_s"] for x in runs], 0)}
            rows.append(row)
            print("| " + " | ".join(str(v) for v in row.values()) + " |")
    for spec in args.ratio:
        a, b = spec.split("/")
        print(f"\n{a} / {b}, per seed (geometric mean [95% interval], seeds):")
        for rate in rates:
            t = ratio(cells, a, b, rate, lambda x: time_to(x["curve"], target))
            f = ratio(cells, a, b, rate, lambda x: x["final"])
            line = f"  {rate} Mbit/s: time to target "
            line += "-" if t is None else f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}] ({t[3]})"
            line += "; final loss " + ("-" if f is None else f"{f[0]:.3f} [{f[1]:.3f}, {f[2]:.3f}]")
            print(line)
    if skipped:
        print("\nnot counted: " + "; ".join(skipped))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["method", "rate_mbit", "seed", "time_to_target_s", "final_loss", "loss_at_budget",
                        "training_seconds", "steps", "busiest_host", "busiest_sent_mb", "busiest_received_mb"])
            for (m, rate), seeds in sorted(cells.items()):
                for seed, x in sorted(seeds.items()):
                    t = time_to(x["curve"], target)
                    w.writerow([m, rate, seed, "" if t is None else round(t, 2), round(x["final"], 4),
                                round(loss_at(x["curve"], args.budget_s), 4), round(x["training_seconds"], 2),
                                x["steps"], x["busiest_host"], round(x["busiest_sent_mb"], 2),
                                round(x["busiest_received_mb"], 2)])
    if args.figure:
        figure(cells, [r for r in rates], args.figure, target)


if __name__ == "__main__":
    main()
