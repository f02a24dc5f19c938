#!/usr/bin/python3
"""Sequential CPU training throughput: tether's trainer beside PyTorch, and the GEMM-only bound.

Runs build/experiments/tether-bench, then the same training in PyTorch (MLP 784-256-128-10,
cross-entropy, Adam lr 1e-3, Fashion-MNIST), and prints the medians and each run's figure.
Needs Debian's python3 (python3-torch, python3-numpy):
    /usr/bin/python3 experiments/bench_sequential.py [--repeats 5] [--steps 938] [--json out.json]
"""
import argparse
import ctypes
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
WARMUP_STEPS = 50  # as tether-bench: page in buffers, let allocators and BLAS settle


def read_idx(path):
    """Parse a gzip IDX file: magic (2 zero bytes, dtype code, ndim), big-endian dims, data."""
    raw = gzip.open(path, "rb").read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        sys.exit(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(*dims)


def load_train(data_dir):
    images = read_idx(Path(data_dir) / "train-images-idx3-ubyte.gz")
    labels = read_idx(Path(data_dir) / "train-labels-idx1-ubyte.gz")
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / np.float32(255))
    return x, torch.from_numpy(labels.astype(np.int64))


def run_tether(args):
    cmd = [str(args.tether_bench), "--threads", str(args.threads), "--batch", str(args.batch),
           "--steps", str(args.steps), "--repeats", str(args.repeats), "--data", str(args.data)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch(args, foreach):
    torch.set_num_threads(args.threads)
    # Debian's torch does its GEMMs in the system OpenBLAS (pthread build), whose own thread pool
    # ignores torch.set_num_threads and would take every core; pin it as tether-bench does.
    ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(args.threads)
    torch.manual_seed(1)
    x, y = load_train(args.data)
    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))
    return time_training(model, x, y, args, foreach)


def time_training(model, x, y, args, foreach):
    """Samples/s of each of args.repeats timed runs of args.steps Adam steps, after a warm-up."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=foreach)
    loss_fn = torch.nn.CrossEntropyLoss()
    # Mirror LocalTrainer::step: walk a shuffled order of the training set, gather one batch of
    # rows per step (the last batch of an epoch is short), reshuffle at each epoch boundary.
    state = {"order": torch.randperm(len(x)), "cursor": 0}

    def step():
        if state["cursor"] >= len(x):
            state["order"], state["cursor"] = torch.randperm(len(x)), 0
        idx = state["order"][state["cursor"]:state["cursor"] + args.batch]
        state["cursor"] += len(idx)
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(WARMUP_STEPS):
        step()
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        # Count steps * batch, as tether-bench does (the one short batch per epoch counts as full).
        rates.append(args.steps * args.batch / (time.perf_counter() - t0))
    return rates


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tether-bench", type=Path, default=REPO / "build/experiments/tether-bench")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=938, help="steps per repeat (938 = one epoch at batch 64)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    if not args.tether_bench.is_file():
        sys.exit(f"{args.tether_bench}: not found; build it with ninja -C build")

    # One after the other, never at once: the two would compete for the same cores.
    tether = run_tether(args)
    # PyTorch twice: its default Adam and the multi-tensor (foreach) one, which is faster here;
    # the ratio is taken against the faster, so the peer is at its best.
    torch_by_variant = {variant: run_torch(args, foreach) for variant, foreach in
                        [("Adam default", False), ("Adam foreach", True)]}
    best_variant = max(torch_by_variant, key=lambda v: statistics.median(torch_by_variant[v]))
    torch_runs = torch_by_variant[best_variant]
    trainer = tether["trainer_samples_per_second"]
    gemm = tether["gemm_only_samples_per_second"]
    pytorch = statistics.median(torch_runs)
    result = {
        "threads": args.threads, "batch": args.batch, "steps": args.steps, "repeats": args.repeats,
        "torch_version": torch.__version__,
        "tether_samples_per_second": trainer,
        "pytorch_samples_per_second": pytorch,
        "gemm_only_samples_per_second": gemm,
        "tether_over_pytorch": trainer / pytorch,
        "tether_fraction_of_gemm_bound": trainer / gemm,
        "pytorch_variant": best_variant,
        "tether_runs": tether["trainer_runs"], "pytorch_runs": torch_by_variant, "gemm_runs": tether["gemm_runs"],
    }

    print(f"Sequential CPU training, MLP 784-256-128-10, Adam, batch {args.batch}, {args.threads} thread(s), "
          f"{args.repeats} x {args.steps} steps (PyTorch {torch.__version__})")
    print(f"{'':22}{'median samples/s':>18}   runs")
    rows = [("tether trainer", trainer, tether["trainer_runs"])]
    rows += [(f"PyTorch ({v})", statistics.median(r), r) for v, r in torch_by_variant.items()]
    rows += [("GEMM-only bound", gemm, tether["gemm_runs"])]
    for name, median, runs in rows:
        print(f"{name:22}{median:18,.0f}   " + " ".join(f"{r:,.0f}" for r in runs))
    print(f"{'tether / PyTorch':22}{trainer / pytorch:18.3f}   (against {best_variant})")
    print(f"{'tether / GEMM bound':22}{trainer / gemm:18.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
