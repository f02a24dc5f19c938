#!/usr/bin/python3
"""Sequential CPU training throughput as a user sees it: whole runs, epoch by epoch.

1. One thread: build/experiments/tether-bench trains one model for --epochs epochs, then
   PyTorch trains the same MLP 784-256-128-10 (cross-entropy, Adam lr 1e-3, Fashion-MNIST,
   batch 64) the same way, with its default and its foreach Adam, each with and without
   torch.set_flush_denormal(True). Prints samples/s by epoch (a slowdown shows), the whole
   run's figure, tether / PyTorch, and the GEMM-only bound of the same shapes.
2. The main job exactly as scripts/run-main.sh runs it (default config and threads), its
   per-epoch samples/s from metrics.jsonl, and the GEMM-only bound at its thread count,
   measured in the same run right before and right after the job; the job is compared with
   the mean of the two. This shared machine has periods of minutes in which everything runs
   15-30% slower, so a bound taken only on one side of the job can fall in another period.
Needs Debian's python3 (python3-torch, python3-numpy):
    /usr/bin/python3 experiments/bench/bench_sequential.py [--epochs 10] [--skip-main-job] [--json out.json]
"""
import argparse
import ctypes
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
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


def run_tether_bench(args, threads, repeats, gemm_repeats):
    cmd = [str(args.tether_bench), "--threads", str(threads), "--batch", str(args.batch),
           "--steps", str(args.steps), "--repeats", str(repeats), "--gemm-repeats", str(gemm_repeats),
           "--data", str(args.data)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch(args, foreach, flush_denormal):
    """One model trained for args.epochs epochs; returns the samples/s of each epoch."""
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(flush_denormal)
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
    """Samples/s of each of args.epochs timed runs of args.steps Adam steps, after a warm-up."""
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
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        # Count steps * batch, as tether-bench does (the one short batch per epoch counts as full).
        rates.append(args.steps * args.batch / (time.perf_counter() - t0))
    torch.set_flush_denormal(False)
    return rates


def whole_run(rates):
    """Samples/s of the whole run: equal samples per epoch, so the harmonic mean of the epochs."""
    return len(rates) / sum(1.0 / r for r in rates)


def run_main_job(args, threads=None):
    """The main job as a user runs it (scripts/run-main.sh: default config, default threads)."""
    with tempfile.TemporaryDirectory() as out:
        extra = ["--set", f"training.threads={threads}"] if threads else []
        subprocess.run([str(args.tether), "run", str(REPO / "configs/sequential.json"), "--out", out] + extra,
                       check=True, capture_output=True, text=True)
        metrics = [json.loads(line) for line in Path(out, "metrics.jsonl").read_text().splitlines()]
        summary = json.loads(Path(out, "summary.json").read_text())
        config = json.loads(Path(out, "config.json").read_text())
    # The t = 0 evaluation (no samples trained yet) has no rate.
    return {"epoch_rates": [m["samples_per_second"] for m in metrics if m["samples"] > 0],
            "samples_per_second": summary["samples_per_second"],
            "final_test_accuracy": summary["final_test_accuracy"],
            "epochs": config["training"]["epochs"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tether-bench", type=Path, default=REPO / "build/experiments/tether-bench")
    p.add_argument("--tether", type=Path, default=REPO / "build/tether")
    p.add_argument("--epochs", type=int, default=10, help="epochs of the one-thread comparison (one model each)")
    p.add_argument("--steps", type=int, default=938, help="steps per epoch (938 = Fashion-MNIST at batch 64)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    p.add_argument("--skip-main-job", action="store_true", help="leave out the main job and its GEMM bound")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    for binary in (args.tether_bench, args.tether):
        if not binary.is_file():
            sys.exit(f"{binary}: not found; build it with ninja -C build")

    # One after the other, never at once: they would compete for the same cores.
    tether = run_tether_bench(args, args.threads, args.epochs, 3)
    # PyTorch's default Adam and the multi-tensor (foreach) one, each with and without
    # torch.set_flush_denormal(True); ratios are taken against the fastest, so the peer is at its best.
    torch_runs = {f"PyTorch Adam {variant}, flush {'on' if flush else 'off'}": run_torch(args, foreach, flush)
                  for variant, foreach in [("default", False), ("foreach", True)] for flush in (False, True)}
    best = max(torch_runs, key=lambda v: whole_run(torch_runs[v]))
    tether_rate = tether["trainer_whole_run_samples_per_second"]
    result = {
        "threads": args.threads, "batch": args.batch, "steps_per_epoch": args.steps, "epochs": args.epochs,
        "torch_version": torch.__version__,
        "tether_epoch_rates": tether["trainer_runs"], "tether_samples_per_second": tether_rate,
        "pytorch_epoch_rates": torch_runs,
        "pytorch_samples_per_second": {v: whole_run(r) for v, r in torch_runs.items()},
        "tether_over_pytorch": {v: tether_rate / whole_run(r) for v, r in torch_runs.items()},
        "gemm_only_samples_per_second": tether["gemm_only_samples_per_second"],
    }

    print(f"Sequential CPU training, MLP 784-256-128-10, Adam, batch {args.batch}, {args.threads} thread(s), "
          f"one model for {args.epochs} epochs of {args.steps} steps (PyTorch {torch.__version__})")
    rows = [("tether", tether["trainer_runs"])] + list(torch_runs.items())
    print(f"{'samples/s by epoch':34}" + "".join(f"{e + 1:>8}" for e in range(args.epochs)) +
          f"{'whole run':>11}{'slowest/fastest':>17}")
    for name, rates in rows:
        print(f"{name:34}" + "".join(f"{r:8,.0f}" for r in rates) + f"{whole_run(rates):11,.0f}" +
              f"{min(rates) / max(rates):17.2f}")
    for name, rates in torch_runs.items():
        print(f"tether / {name:40}{tether_rate / whole_run(rates):6.2f}")
    print(f"GEMM-only bound ({args.threads} thread(s)): {tether['gemm_only_samples_per_second']:,.0f} samples/s; "
          f"tether at {tether_rate / tether['gemm_only_samples_per_second']:.2f} of it")

    if not args.skip_main_job:
        cores = os.cpu_count() or 1
        # The GEMM-only bound at the main job's thread count (all cores), measured in this run
        # on both sides of the job: the fastest of one GEMM call on OpenBLAS's threads, the
        # batch in row slices, and each layer in blocks of rows (what the main job's trainer
        # does on several threads).
        before = run_tether_bench(args, cores, 0, 3)
        main_job = run_main_job(args)
        bounds = run_tether_bench(args, cores, 0, 3)
        bracket = [before["gemm_only_samples_per_second"], bounds["gemm_only_samples_per_second"]]
        bound = sum(bracket) / 2
        rates = main_job["epoch_rates"]
        main_job.update({"threads": cores, "gemm_only_samples_per_second": bound,
                         "gemm_only_before_and_after_samples_per_second": bracket,
                         "gemm_only_one_call_after_job_samples_per_second": bounds.get("gemm_only_one_call_samples_per_second"),
                         "gemm_only_row_slices_after_job_samples_per_second": bounds.get("gemm_only_row_slices_samples_per_second"),
                         "gemm_only_layer_blocks_after_job_samples_per_second": bounds.get("gemm_only_layer_blocks_samples_per_second"),
                         "fraction_of_gemm_bound": main_job["samples_per_second"] / bound,
                         "slowest_over_fastest_epoch": min(rates) / max(rates)})
        result["main_job"] = main_job
        print(f"\nMain job (tether run configs/sequential.json, {main_job['epochs']} epochs, {cores} threads): "
              f"{main_job['samples_per_second']:,.0f} samples/s, test accuracy {100 * main_job['final_test_accuracy']:.2f}%")
        print("  samples/s by epoch: " + " ".join(f"{r:,.0f}" for r in rates))
        print(f"  slowest / fastest epoch {main_job['slowest_over_fastest_epoch']:.2f}; GEMM-only bound "
              f"({cores} threads) {bound:,.0f} samples/s (before the job {bracket[0]:,.0f}, after {bracket[1]:,.0f}); "
              f"main job at {main_job['fraction_of_gemm_bound']:.2f} of it")
        if cores > 1:
            print(f"  (GEMM-only after the job, {cores} threads: one call on OpenBLAS's threads "
                  f"{bounds['gemm_only_one_call_samples_per_second']:,.0f}, in row slices "
                  f"{bounds['gemm_only_row_slices_samples_per_second']:,.0f}, in layer blocks "
                  f"{bounds['gemm_only_layer_blocks_samples_per_second']:,.0f} samples/s)")
            # The same job on one thread: more threads must not be slower.
            single = run_main_job(args, threads=1)
            result["main_job_one_thread"] = single
            print(f"Main job on 1 thread (--set training.threads=1): {single['samples_per_second']:,.0f} samples/s, "
                  f"test accuracy {100 * single['final_test_accuracy']:.2f}%; {cores} threads / 1 thread = "
                  f"{main_job['samples_per_second'] / single['samples_per_second']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
