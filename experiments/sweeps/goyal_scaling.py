#!/usr/bin/python3
"""Goyal et al.'s linear scaling rule for synchronous SGD, against one large batch.

    experiments/sweeps/goyal_scaling.py [--out sweeps/goyal_scaling] [--jobs J]
        [--seeds 5] [--set KEY=VALUE] [--tether build/tether] [--base-only]

Goyal, Dollár, Girshick et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
2017: when the minibatch grows k-fold, multiply the learning rate by k, and ramp it up over the
first epochs ("gradual warm-up"); then large-batch training matches the small batch's accuracy
at the same number of epochs.

1. The base rate: plain SGD, one worker of batch 64 (experiments/sweeps/fashion_sgd_base.json, 10
   epochs), its rate tuned on the validation set with experiments/sweeps/tune.py (grid 0.03, 0.1, 0.3,
   widened until the best is inside) and run with --seeds seeds: the small-batch reference.
2. For k in {4, 8, 16}: synchronous SGD (averaging, tau = 1: one step on the mean gradient of
   k x 64 samples per round) over k workers of batch 64, with
     linear+warmup  rate k * eta, warm-up over the first half epoch (Goyal's 5 of 90 epochs
                    is 6% of training; here 5%); tether's ramp starts near 0, Goyal's at eta,
     linear         rate k * eta, no warm-up,
     unscaled       rate eta,
   and one worker of batch 64 k at rate k * eta with the warm-up (the large batch itself).
Writes the runs into OUT/base (step 1; OUT/base/summary.csv: the k = 1 reference's seeds) and
OUT (step 2), resumable, and OUT/goyal.csv. --base-only stops after step 1. Run from the
repository root with PYTHONPATH=experiments:examples/python (experiments/README.md).
"""
import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

from tetherlab.tether_sweep import run_id

HERE = Path(__file__).resolve().parent
KEY = "training.optimizer.learning_rate"
FACTORS = [4, 8, 16]
WARMUP = 0.5


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("sweeps/goyal_scaling"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--set", action="append", default=[], dest="assignments", help="KEY=VALUE for every run")
    parser.add_argument("--tether", default=str(HERE.parents[1] / "build" / "tether"))
    parser.add_argument("--base-only", action="store_true", help="tune and run the k = 1 reference only")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sets = [x for a in args.assignments for x in ("--set", a)]

    base = str(HERE / "fashion_sgd_base.json")
    tuning = {"name": "goyal_base", "base": base, "grid": {KEY: [0.03, 0.1, 0.3]},
              "points": [{"cluster.workers": 1}], "repeats": 1}
    (args.out / "base_tune.json").write_text(json.dumps(tuning, indent=2) + "\n")
    command = ["/usr/bin/python3", str(HERE / "tune.py"), str(args.out / "base_tune.json"), "--key", KEY,
               "--final-repeats", str(args.seeds), "--jobs", str(args.jobs), "--out", str(args.out / "base"),
               "--tether", args.tether] + sets
    print("goyal_scaling:", " ".join(command), flush=True)
    if subprocess.run(command, stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit("goyal_scaling: tuning the base rate failed")
    with open(args.out / "base" / "tune_result.csv") as f:
        eta = float(next(csv.DictReader(f))[f"best_{KEY}"])
    if args.base_only:
        print(f"goyal_scaling: base rate {eta}; {args.out / 'base' / 'summary.csv'}")
        return 0

    points = []
    for k in FACTORS:
        scaled = float(f"{k * eta:.6g}")
        points += [{"rule": "linear+warmup", "cluster.workers": k, "training.batch_size": 64, KEY: scaled,
                    "training.optimizer.warmup_epochs": WARMUP},
                   {"rule": "linear", "cluster.workers": k, "training.batch_size": 64, KEY: scaled,
                    "training.optimizer.warmup_epochs": 0},
                   {"rule": "unscaled", "cluster.workers": k, "training.batch_size": 64, KEY: eta,
                    "training.optimizer.warmup_epochs": 0},
                   {"rule": "large batch", "cluster.workers": 1, "training.batch_size": 64 * k, KEY: scaled,
                    "training.optimizer.warmup_epochs": WARMUP}]
    sweep_points = [{k: v for k, v in p.items() if k != "rule"} for p in points]
    sweep = {"name": "goyal_scaling", "base": base, "points": sweep_points, "repeats": args.seeds}
    (args.out / "goyal_sweep.json").write_text(json.dumps(sweep, indent=2) + "\n")
    command = [args.tether, "sweep", str(args.out / "goyal_sweep.json"), "--out", str(args.out),
               "--jobs", str(args.jobs)] + sets
    print("goyal_scaling:", " ".join(command), flush=True)
    subprocess.run(command, stdout=subprocess.DEVNULL)  # a diverged run is a result, not an error
    with open(args.out / "goyal.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["rule", "workers", "batch_size", "learning_rate", "warmup_epochs", "repeat",
                      "final_test_accuracy", "final_validation_accuracy", "run_failed"])
        for p, sp in zip(points, sweep_points):
            for r in range(args.seeds):
                path = args.out / run_id(list(sp.items()), r) / "summary.json"
                s = json.loads(path.read_text()) if path.is_file() else {}
                out.writerow([p["rule"], sp["cluster.workers"], sp["training.batch_size"], sp[KEY],
                              sp["training.optimizer.warmup_epochs"], r, s.get("final_test_accuracy"),
                              s.get("final_validation_accuracy"), s.get("run_failed")])
    print(f"goyal_scaling: base rate {eta}; {args.out / 'goyal.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
