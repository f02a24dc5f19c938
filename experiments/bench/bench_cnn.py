#!/usr/bin/python3
"""Sequential CPU training throughput of a convolutional network: tether beside PyTorch.

Runs build/experiments/tether-bench --layers LAYERS, then the same network in PyTorch (the
same layer list translated to torch.nn, cross-entropy, Adam lr 1e-3, Fashion-MNIST 1x28x28),
one after the other, and prints the medians, each run's figure and the ratio.
Needs Debian's python3 (python3-torch, python3-numpy):
    /usr/bin/python3 experiments/bench/bench_cnn.py [--epochs 3] [--steps 300] [--threads 1]
"""
import argparse
import ctypes
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from bench_sequential import REPO, load_train, time_training

# configs/cnn-sequential.json's model.
DEFAULT_LAYERS = ["conv 32 3x3 pad 1", "relu", "maxpool 2", "conv 64 3x3 pad 1", "relu", "maxpool 2",
                  "dense 128", "relu", "dropout 0.25", "dense 10"]


def torch_model(layers, shape):
    """The torch.nn equivalent of a tether layer list (docs/models.md), for input (C, H, W)."""
    modules, (c, h, w) = [], shape
    for text in layers:
        t = text.split()
        if t[0] == "conv":
            kh, _, kw = t[2].partition("x")
            kh, kw = int(kh), int(kw or kh)
            opts = dict(zip(t[3::2], map(int, t[4::2])))
            stride, pad = opts.get("stride", 1), opts.get("pad", 0)
            modules.append(torch.nn.Conv2d(c, int(t[1]), (kh, kw), stride=stride, padding=pad))
            c, h, w = int(t[1]), (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
        elif t[0] == "maxpool":
            modules.append(torch.nn.MaxPool2d(int(t[1])))
            h, w = h // int(t[1]), w // int(t[1])
        elif t[0] == "relu":
            modules.append(torch.nn.ReLU())
        elif t[0] == "dropout":
            modules.append(torch.nn.Dropout(float(t[1])))
        elif t[0] == "dense":
            if h * w > 1 or not modules or not isinstance(modules[-1], torch.nn.Flatten):
                modules.append(torch.nn.Flatten())
            modules.append(torch.nn.Linear(c * h * w, int(t[1])))
            c, h, w = int(t[1]), 1, 1
        else:
            sys.exit(f"bench_cnn: layer {text!r} has no torch equivalent here")
    return torch.nn.Sequential(*modules)


def run_tether(args):
    cmd = [str(args.tether_bench), "--threads", str(args.threads), "--batch", str(args.batch),
           "--steps", str(args.steps), "--repeats", str(args.epochs), "--data", str(args.data),
           "--layers", ";".join(args.layers)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch(args, foreach):
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as tether (training.flush_denormals, on by default)
    ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(args.threads)  # see bench_sequential.py
    torch.manual_seed(1)
    x, y = load_train(args.data)
    x = x.reshape(len(x), 1, 28, 28)
    model = torch_model(args.layers, (1, 28, 28))
    model.train()
    return time_training(model, x, y, args, foreach)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tether-bench", type=Path, default=REPO / "build/experiments/tether-bench")
    p.add_argument("--epochs", type=int, default=3, help="timed runs of --steps steps, one model throughout")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--layers", nargs="+", default=DEFAULT_LAYERS, help="tether layer texts (docs/models.md)")
    p.add_argument("--data", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    if not args.tether_bench.is_file():
        sys.exit(f"{args.tether_bench}: not found; build it with ninja -C build")

    tether = run_tether(args)  # one after the other, never at once
    torch_by_variant = {v: run_torch(args, f) for v, f in [("Adam default", False), ("Adam foreach", True)]}
    best = max(torch_by_variant, key=lambda v: statistics.median(torch_by_variant[v]))
    trainer, pytorch = tether["trainer_samples_per_second"], statistics.median(torch_by_variant[best])
    print(f"Sequential CPU training, {tether['model']}, Adam, batch {args.batch}, {args.threads} thread(s), "
          f"{args.epochs} x {args.steps} steps (PyTorch {torch.__version__}, "
          f"mkldnn {'on' if torch.backends.mkldnn.is_available() else 'off'})")
    print(f"{'':22}{'median samples/s':>18}   runs")
    rows = [("tether trainer", trainer, tether["trainer_runs"])]
    rows += [(f"PyTorch ({v})", statistics.median(r), r) for v, r in torch_by_variant.items()]
    for name, median, runs in rows:
        print(f"{name:22}{median:18,.0f}   " + " ".join(f"{r:,.0f}" for r in runs))
    print(f"{'tether / PyTorch':22}{trainer / pytorch:18.3f}   (against {best})")
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "batch": args.batch, "layers": args.layers,
                                         "torch_version": torch.__version__, "tether_samples_per_second": trainer,
                                         "pytorch_samples_per_second": pytorch, "tether_over_pytorch": trainer / pytorch,
                                         "pytorch_variant": best, "tether_runs": tether["trainer_runs"],
                                         "pytorch_runs": torch_by_variant}, indent=2) + "\n")


if __name__ == "__main__":
    main()
