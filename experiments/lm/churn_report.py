#!/usr/bin/python3
"""The language model under churn (experiments/lm/specs/lm_churn_*.json, docs/results.md §15):
per cell, whether the run finished (rank 0 exited 0 with its result and no other program failed,
but for a restart the schedule began in rank 0's last 15 s, which may find the run over), the kills that struck before rank 0 ended, rank 0's time to the target loss,
its final loss, its longest stall (the largest gap between two of its evaluations, every 50
steps, less the median gap: time it waited beyond its usual pace), and torchft's committed
rounds; then each churn cell's time over its own fault-free cell's and over torchft's under the
same schedule, per seed and over the seeds (geometric mean, 95% interval of the mean log ratio).
`--rows CSV` adds the rows of an earlier report (seeds run before: a cell of the same method and
seed in the directories replaces its row).

    experiments/lm/churn_report.py runs/testbed/lm_churn_tether runs/testbed/lm_churn_torchft [--rows CSV] [--target NATS] [--csv PATH]
"""
import argparse
import csv
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from report import time_to  # noqa: E402  (the grid's own interpolation)
from tetherlab.stats import ratio_interval  # noqa: E402


def cells(directory, target):
    peer = os.path.basename(os.path.normpath(directory)).removeprefix("lm_")
    for path in sorted(glob.glob(os.path.join(directory, "cells", "*", "result.json"))):
        r = json.load(open(path))
        name = r["cell"]["name"]
        method, seed = re.sub(r",.*", "", name), int(re.search(r"seed=(\d+)", name).group(1))
        lm = r.get("collected", {}).get("lm.json", {})
        curve = lm.get("curve", [])
        rank0 = next((p for p in r.get("processes", []) if p["name"] == "rank0"), {})
        ended = rank0.get("seconds")
        gaps = [b["seconds"] - a["seconds"] for a, b in zip(curve, curve[1:])]
        # Finished: rank 0 ended with its result, and no other program failed, but for a restart
        # the schedule began in rank 0's last 15 s (its center may have ended already: that
        # restart finds no run to join, as it would under any supervisor).
        late = (ended or 0) - 15
        started = {}  # a restart's name -> when the schedule started it (the kill that took its predecessor down)
        for k in r.get("kills", []):
            for name in k["programs"]:
                base, _, n = name.partition(".restart")
                started[f"{base}.restart{int(n or 0) + 1}"] = k.get("back_at_s")
        # (Killed by the testbed at the cell's end: a program it does not wait for, the lighthouse.)
        failed = [p["name"] for p in r.get("processes", []) if not p.get("scheduled_kill") and not p.get("killed")
                  and p["exit"] not in (0, None) and not ((started.get(p["name"]) or 0) >= late)]
        finished = rank0.get("exit") == 0 and "final_validation_loss" in lm and not failed
        yield {"peer": peer, "method": method, "seed": seed, "status": r["status"], "finished": finished,
               "kills": len([k for k in r.get("kills", []) if ended is None or k["at_s"] < ended]),
               "time_to_target_s": round(time_to(curve, target), 1) if time_to(curve, target) is not None else None,
               "final_loss": lm.get("final_validation_loss"),
               "longest_stall_s": round(max(gaps) - statistics.median(gaps), 1) if len(gaps) > 2 else None,
               "torchft_commits": lm.get("torchft_commits"), "rank0_wall_s": ended}


def earlier_rows(path):
    """The rows of an earlier report's CSV, typed as cells() gives them."""
    def value(v):
        if v in ("", "None"):
            return None
        if v in ("True", "False"):
            return v == "True"
        try:
            return int(v)
        except ValueError:
            try:
                return float(v)
            except ValueError:
                return v
    with open(path, newline="") as f:
        return [{k: value(v) for k, v in row.items()} for row in csv.DictReader(f)]


def ratios(label, pairs):
    """One line: the per-seed ratios and their geometric mean with its 95% interval."""
    if not pairs:
        return f"{label}: no pairs"
    mean, low, high, n = ratio_interval([(a, b) for _, a, b in pairs])
    seeds = ", ".join(f"{a / b:.2f} (seed {seed})" for seed, a, b in pairs)
    return f"{label}: {mean:.2f}x [{low:.2f}, {high:.2f}] over {n} seeds: {seeds}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+")
    p.add_argument("--rows", help="an earlier report's CSV, whose rows (other seeds) join these")
    p.add_argument("--target", type=float, default=1.73)
    p.add_argument("--csv")
    args = p.parse_args()
    rows = [c for d in args.results for c in cells(d, args.target)]
    if args.rows:
        have = {(r["peer"], r["method"], r["seed"]) for r in rows}
        rows = [r for r in earlier_rows(args.rows) if (r["peer"], r["method"], r["seed"]) not in have] + rows
        rows.sort(key=lambda r: (r["peer"], r["method"], r["seed"]))
    keys = list(rows[0]) if rows else []
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
    # Churn over fault-free, per seed: the same peer's cell without "-churn" in its name.
    print()
    by = {(r["peer"], r["method"], r["seed"]): r for r in rows}
    for (peer, method, seed), r in sorted(by.items()):
        if not method.endswith("-churn"):
            continue
        base = by.get((peer, method.removesuffix("-churn"), seed))
        if base and base["time_to_target_s"] and r["time_to_target_s"]:
            print(f"{peer} {method} seed {seed}: {r['time_to_target_s'] / base['time_to_target_s']:.2f}x its fault-free time "
                  f"({r['time_to_target_s']} / {base['time_to_target_s']} s)")
        else:
            print(f"{peer} {method} seed {seed}: no ratio (target not reached: {r['time_to_target_s']}, "
                  f"fault-free {base and base['time_to_target_s']})")
    # Over the seeds: each churn method against its fault-free cell, and tether's against torchft's.
    print()
    timed = {k: r["time_to_target_s"] for k, r in by.items() if r["time_to_target_s"]}
    for peer, method in sorted({(p, m) for p, m, _ in by if m.endswith("-churn")}):
        base = method.removesuffix("-churn")
        pairs = [(s, timed[(peer, method, s)], timed[(peer, base, s)]) for _, m, s in sorted(by)
                 if m == method and _ == peer and (peer, method, s) in timed and (peer, base, s) in timed]
        print(ratios(f"{peer} {method} / {base}", pairs))
        if "torchft" in peer:
            continue
        rival = next((k for k in by if "torchft" in k[0] and k[1] == "diloco-h50-churn"), None)
        if rival:
            pairs = [(s, timed[(peer, method, s)], timed[(rival[0], "diloco-h50-churn", s)]) for _, m, s in sorted(by)
                     if m == method and _ == peer and (peer, method, s) in timed
                     and (rival[0], "diloco-h50-churn", s) in timed]
            print(ratios(f"{peer} {method} / torchft diloco-h50-churn", pairs))


if __name__ == "__main__":
    main()
