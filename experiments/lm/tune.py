#!/usr/bin/python3
"""Tunes the language model's rates on loopback, one run at a time: 4 ranks of
examples/python/language_model.py (--processes 4) per candidate, the final validation loss
(nats/token, rank 0's global model) into a CSV. Synchronous methods (DDP, DiLoCo through
torchft or tether) follow the same trajectory in steps whatever the link, so a rate tuned here
holds on every shaped link; an asynchronous one (ADAG) depends on timing, and is tuned here
under loopback's timing (a caveat the results state).

  experiments/lm/tune.py --python ~/venvs/tether-peers/bin/python --out runs/lm/tune.csv [--only NAME]...

Each candidate is a name and the script's arguments; a rerun skips rows already in the CSV."""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
COMMON = ["--preset", "testbed", "--processes", "4", "--eval-every", "50"]


def diloco(window, outer):
    return json.dumps({"name": "diloco", "communication_window": window, "outer_learning_rate": outer})


CANDIDATES = [  # name, arguments
    *[(f"ddp lr={lr}", ["--mode", "ddp", "--lr", str(lr)]) for lr in (1e-3, 3e-3, 6e-3)],
    *[(f"torchft H=50 outer={o}", ["--mode", "torchft", "--sync-every", "50", "--outer-lr", str(o)])
      for o in (0.3, 0.5, 0.7, 1.0)],
    ("torchft H=50 outer=0.5 lr=0.0015", ["--mode", "torchft", "--sync-every", "50", "--outer-lr", "0.5",
                                          "--lr", "0.0015"]),
    *[(f"torchft H=50 outer=0.7 lr={lr}", ["--mode", "torchft", "--sync-every", "50", "--lr", str(lr)])
      for lr in (1.5e-3, 6e-3)],
    *[(f"tether diloco H=50 outer=0.7 codec={c}", ["--mode", "tether", "--strategy", diloco(50, 0.7),
                                                   "--option", f"codec={c}"]) for c in ("int8", "int4")],
    *[(f"tether adag tau=5 lr={lr}", ["--mode", "tether", "--strategy", '{"name": "adag", "communication_window": 5}',
                                      "--lr", str(lr)]) for lr in (1e-3, 3e-3, 6e-3)],
]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", action="append", default=[])
    args = p.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        with open(out) as f:
            done = {(r["name"], int(r["seed"])) for r in csv.DictReader(f)}
    for name, extra in CANDIDATES:
        if (args.only and name not in args.only) or (name, args.seed) in done:
            continue
        with tempfile.TemporaryDirectory() as d:
            summary_path = Path(d) / "summary.json"
            began = time.time()
            run = subprocess.run([args.python, str(SOURCE / "examples/python/language_model.py"), *COMMON, *extra,
                                  "--seed", str(args.seed), "--out", str(summary_path)],
                                 capture_output=True, text=True, env=dict(os.environ, RUST_LOG="warn"))
            if run.returncode or not summary_path.exists():
                print(f"{name}: failed ({run.returncode})\n{run.stderr[-2000:]}", file=sys.stderr)
                continue
            summary = json.loads(summary_path.read_text())
        curve = {p["step"]: p["validation_loss"] for p in summary["curve"]}
        row = {"name": name, "seed": args.seed, "final_validation_loss": round(summary["final_validation_loss"], 4),
               "loss_at_500": round(curve.get(500, float("nan")), 4),
               "training_seconds": round(summary["training_seconds"], 1), "wall_seconds": round(time.time() - began, 1),
               "argv": " ".join(extra)}
        new = not out.exists()
        with open(out, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            if new:
                w.writeheader()
            w.writerow(row)
        print(f"{name}: {row['final_validation_loss']} nats/token ({row['wall_seconds']} s)", flush=True)


if __name__ == "__main__":
    main()
