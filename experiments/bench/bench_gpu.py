#!/usr/bin/python3
"""GPU training and kernel figures: tether's CUDA backend beside PyTorch on the same GPU.

Runs build/experiments/tether-bench-gpu (training per batch size, the vector kernels against a
device-to-device copy, one window's transfers), then the same model in PyTorch on CUDA (Adam
lr 1e-3, cross-entropy, Fashion-MNIST, one model trained for the whole run), one after the
other, and prints samples/s, test accuracy and the ratios. PyTorch runs twice per batch size:
gathering each batch on the host and copying it over (what tether does), and with the whole
training set resident on the GPU (PyTorch at its fastest).
    python3 experiments/bench/bench_gpu.py [--epochs 5] [--batches 64 512] [--cnn [--cnn-epochs 2]] [--tf32] [--json FILE]
Needs a PyTorch built with CUDA and a GPU; exits 77 without one.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from bench_cnn import DEFAULT_LAYERS, torch_model
from bench_sequential import REPO, load_train, read_idx

WARMUP_STEPS = 20  # as tether-bench-gpu


def load_test(data_dir):
    images = read_idx(Path(data_dir) / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(Path(data_dir) / "t10k-labels-idx1-ubyte.gz")
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / np.float32(255))
    return x, torch.from_numpy(labels.astype(np.int64))


def epochs_of(args, layers):
    return args.cnn_epochs if layers else args.epochs


def run_tether(args, layers):
    cmd = [str(args.tether_bench_gpu), "--epochs", str(epochs_of(args, layers)), "--data", str(args.data),
           "--batches", ",".join(map(str, args.batches))]
    if layers:
        cmd += ["--layers", ";".join(layers), "--vector-floats", "0"]
    if args.tf32:
        cmd += ["--tf32", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        sys.exit(f"bench_gpu: {' '.join(cmd)} exited {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def run_torch(args, layers, batch, resident):
    """One model trained for args.epochs epochs on the GPU; samples/s per epoch and test accuracy."""
    torch.manual_seed(1)
    dev = torch.device("cuda")
    x, y = load_train(args.data)
    if layers:
        x = x.reshape(len(x), 1, 28, 28)
    model = (torch_model(layers, (1, 28, 28)) if layers else mlp()).to(dev)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # PyTorch's default on CUDA: foreach
    loss_fn = torch.nn.CrossEntropyLoss()
    if resident:
        x, y = x.to(dev), y.to(dev)
    n, steps = len(x), (len(x) + batch - 1) // batch

    def step(index):
        xb, yb = (x[index], y[index]) if resident else (x[index].to(dev), y[index].to(dev))
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()

    order = torch.randperm(n, device=dev if resident else "cpu")
    for s in range(WARMUP_STEPS):
        step(order[s * batch:(s + 1) * batch])
    torch.cuda.synchronize()
    rates, epochs = [], epochs_of(args, layers)
    for _ in range(epochs):
        order = torch.randperm(n, device=dev if resident else "cpu")
        t0 = time.perf_counter()
        for s in range(steps):
            step(order[s * batch:(s + 1) * batch])
        torch.cuda.synchronize()
        rates.append(n / (time.perf_counter() - t0))
    model.eval()
    tx, ty = load_test(args.data)
    if layers:
        tx = tx.reshape(len(tx), 1, 28, 28)
    with torch.no_grad():
        correct = sum(int((model(tx[i:i + 1000].to(dev)).argmax(1).cpu() == ty[i:i + 1000]).sum())
                      for i in range(0, len(tx), 1000))
    return {"epoch_samples_per_second": rates, "samples_per_second": epochs * n / sum(n / r for r in rates),
            "test_accuracy": correct / len(tx)}


def torch_copy_gb_per_second(floats):
    """A device-to-device copy through PyTorch, counting bytes read and written: the same
    ceiling tether-bench-gpu measures with its own copy, as a cross-check."""
    a = torch.rand(floats, device="cuda")
    b = torch.empty_like(a)
    calls = 20 if floats >= 1 << 24 else 2000
    for _ in range(3):
        b.copy_(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for _ in range(calls):
            b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return 8 * floats / sorted(times)[2] / 1e9


def training_table(title, tether, torch_runs):
    print(f"\n{title}")
    print(f"{'batch':>6} {'tether':>12} {'torch host':>12} {'torch resident':>15} {'tether/best':>12}   "
          f"test accuracy (tether / host / resident), tether slowest/fastest epoch")
    for t in tether["training"]:
        b = t["batch"]
        host, resident = torch_runs[(b, False)], torch_runs[(b, True)]
        best = max(host["samples_per_second"], resident["samples_per_second"])
        print(f"{b:>6} {t['samples_per_second']:>12,.0f} {host['samples_per_second']:>12,.0f} "
              f"{resident['samples_per_second']:>15,.0f} {t['samples_per_second'] / best:>12.2f}   "
              f"{t['test_accuracy']:.4f} / {host['test_accuracy']:.4f} / {resident['test_accuracy']:.4f}, "
              f"{t['slowest_over_fastest']:.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tether-bench-gpu", type=Path, default=REPO / "build/experiments/tether-bench-gpu")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batches", type=int, nargs="+", default=[64, 512])
    p.add_argument("--cnn", action="store_true", help="also the CNN of configs/cnn-sequential.json")
    p.add_argument("--cnn-epochs", type=int, default=2, help="epochs of the CNN runs (each is slower)")
    p.add_argument("--tf32", action="store_true", help="tether with training.tf32 (PyTorch keeps its defaults)")
    p.add_argument("--data", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    p.add_argument("--json", type=Path, help="also write every figure here")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("bench_gpu: PyTorch sees no GPU", file=sys.stderr)
        sys.exit(77)

    models = [("MLP 784-256-128-10", [])] + ([("CNN of configs/cnn-sequential.json", DEFAULT_LAYERS)] if args.cnn else [])
    results = {"torch_version": torch.__version__, "gpu": torch.cuda.get_device_name(), "models": {}}
    for title, layers in models:
        tether = run_tether(args, layers)  # one after the other, never at once
        torch_runs = {(b, r): run_torch(args, layers, b, r) for b in args.batches for r in (False, True)}
        results["models"][title] = {"tether": tether,
                                    "torch": [{"batch": b, "resident": r, **v} for (b, r), v in torch_runs.items()]}
        if not layers:
            mlp_result = tether
        training_table(f"{title}, Adam, {epochs_of(args, layers)} epochs{', tether with TF32 GEMMs' if args.tf32 else ''}, samples/s (PyTorch {torch.__version__}, "
                       f"{torch.cuda.get_device_name()})", tether, torch_runs)

    print(f"\nVector kernels on {mlp_result['device']}: GB/s (bytes read + written once), and / copy")
    for key in ("vector_kernels_large", "vector_kernels_mlp"):
        k = mlp_result[key]
        torch_copy = torch_copy_gb_per_second(k["floats"])
        print(f"  {k['floats']:,} floats (PyTorch's copy: {torch_copy:,.0f} GB/s)")
        for name, op in k["ops"].items():
            print(f"    {name:16}{op['gb_per_second']:>9,.0f} GB/s {op['of_copy']:>6.2f}  {op['microseconds']:>10.1f} us")
        k["torch_copy_gb_per_second"] = torch_copy  # k lies inside results: the JSON gets it too
    x = mlp_result["exchange_transfers"]
    print(f"\nOne window's transfers, {x['floats']:,} floats:")
    for memory in ("pageable", "pinned"):
        if memory in x:
            t = x[memory]
            print(f"  {memory:9} host memory: to host {t['to_host_microseconds']:.1f} us ({t['to_host_gb_per_second']:.1f} GB/s), "
                  f"to device {t['to_device_microseconds']:.1f} us ({t['to_device_gb_per_second']:.1f} GB/s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
