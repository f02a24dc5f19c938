#!/usr/bin/python3
"""Prints a Markdown table of a testbed run's cells: what ran, time, accuracy, bytes per worker,
and the self-check's range. Reads RESULTS/cells/*/result.json (testbed.py run writes them).

    report.py runs/testbed/pilot [runs/testbed/ddp ...]

tether cells are read from run/summary.json (time: wall_seconds; bytes: bytes_to_center +
bytes_to_workers, payload as sent, over the workers); DDP cells from ddp.json (time:
training_seconds; bytes: interface bytes, headers included). "link bytes/worker" is what the
workers' own links carried, headers included, from the testbed's interface counters: the
figure to compare across frameworks. "busiest link": the largest share of its rate a host's
link carried over the cell's run.
"""

import glob
import json
import os
import sys


def rate_text(result):
    rates = {l["rate_mbit"] for l in result["cell"]["links"].values()}
    return ", ".join("unshaped" if r is None else f"{r:g} Mbit/s" for r in sorted(rates, key=lambda r: r or 1e18))


def check_text(result):
    errors = [c.get("relative_error") for c in result.get("selfcheck", []) if c.get("relative_error") is not None]
    if errors:
        return f"{min(errors):+.1%} .. {max(errors):+.1%}"
    measured = [c["measured_mbit"] for c in result.get("selfcheck", []) if c.get("measured_mbit")]
    return f"{min(measured) / 1e3:.1f}-{max(measured) / 1e3:.1f} Gbit/s" if measured else "-"


def busiest_link(result):
    """The highest share of its rate any host's link carried, either way, over the programs'
    whole run (joins and evaluations included): how close the run came to the network's
    bound."""
    shares = []
    for host, t in result.get("link_bytes", {}).items():
        rate = result["cell"]["links"][host]["rate_mbit"]
        if rate and result.get("seconds"):
            shares.append((max(t["sent"], t["received"]) * 8 / (rate * 1e6 * result["seconds"]), host))
    return f"{max(shares)[1]} {max(shares)[0]:.0%}" if shares else "-"


def worker_link_bytes(result, workers):
    traffic = result.get("link_bytes", {})
    return sum(t["sent"] + t["received"] for h, t in traffic.items() if h in workers) / max(1, len(workers))


def row(result):
    collected = result.get("collected", {})
    if "run/summary.json" in collected:
        s = collected["run/summary.json"]
        hosts = [p["host"] for p in result["processes"] if p["name"].startswith("worker")]
        what = f"tether {s.get('strategy')}"
        window = s.get("communication_window")
        seconds = s.get("wall_seconds")
        epochs = s.get("epochs")
        validation, test = s.get("final_validation_accuracy"), s.get("final_test_accuracy")
        payload = (s.get("bytes_to_center", 0) + s.get("bytes_to_workers", 0)) / max(1, s.get("workers", 1))
    elif "ddp.json" in collected:
        s = collected["ddp.json"]
        hosts = [p["host"] for p in result["processes"]]
        what, window, seconds, epochs = "DDP gloo", 1, s.get("training_seconds"), s.get("epochs")
        validation, test = s.get("final_validation_accuracy"), s.get("final_test_accuracy")
        payload = None
    else:
        return None
    fmt = lambda v, f: "-" if v is None else format(v, f)
    return (f"| {rate_text(result)} | {what} | {window} | {fmt(epochs, 'g')} | {fmt(seconds, '.1f')} | "
            f"{fmt(validation, '.2%')} | {fmt(test, '.2%')} | {'-' if payload is None else f'{payload / 1e6:.0f}'} | "
            f"{worker_link_bytes(result, hosts) / 1e6:.0f} | {busiest_link(result)} | {check_text(result)} |")


def main(directories):
    print("| link per host | run | window | epochs | time (s) | val. acc. | test acc. | payload MB/worker | "
          "link MB/worker | busiest link | self-check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for directory in directories:
        results = []
        for path in glob.glob(os.path.join(directory, "cells", "*", "result.json")):
            with open(path) as f:
                results.append(json.load(f))
        for result in sorted(results, key=lambda r: r.get("finished_at", "")):  # the order they ran in
            line = row(result) if result.get("status") == "ok" else None
            print(line or f"| {result['cell']['name']} | {result.get('status')} | | | | | | | | | |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
