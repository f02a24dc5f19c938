#!/usr/bin/python3
"""Train a PyTorch MLP on Fashion-MNIST with tether: one center, N worker processes.

The center runs in this process on tcp://127.0.0.1 (a port the OS picks); N worker processes
(torch.multiprocessing, spawn) each train the same MLP 784-256-128-10 with Adam on their own
1/N of the training set and exchange with the center through tether.torch after every
optimizer step. An epoch is one pass over the training set by all workers together. At the
end the center's x~ is evaluated on the 10,000 test images.

    /usr/bin/python3 examples/python/fashion_mnist.py --strategy adag --workers 4 --epochs 10
    /usr/bin/python3 examples/python/fashion_mnist.py --baseline      # plain PyTorch, one process

With --run-dir DIR the center writes a run directory as `tether run` does (docs/python.md, "Run
records") and each worker logs its epoch's mean training loss and its own model's accuracy on
the test images into it; `experiments/plot.py DIR` draws them.

Needs Debian's python3 with python3-torch and python3-numpy, the dataset-fashion-mnist
package, and the tether package on PYTHONPATH (build/python in a build tree).
"""
import argparse
import gzip
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.multiprocessing as mp

import tether
import tether.torch


def read_idx(path):
    """A gzip IDX file (magic: two zero bytes, type 0x08, ndim; big-endian dims; bytes)."""
    raw = gzip.open(path, "rb").read()
    if raw[:3] != b"\x00\x00\x08":
        sys.exit(f"{path}: not an unsigned-byte IDX file")
    dims = np.frombuffer(raw, dtype=">u4", count=raw[3], offset=4)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * raw[3]).reshape(*dims)


def load(data_dir, split, limit=None):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(Path(data_dir) / f"{prefix}-images-idx3-ubyte.gz")[:limit]
    labels = read_idx(Path(data_dir) / f"{prefix}-labels-idx1-ubyte.gz")[:limit]
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / np.float32(255))
    return x, torch.from_numpy(labels.astype(np.int64))


def make_model():
    torch.manual_seed(0)  # every process builds the same x(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    # He initialization, as tether's own MLP: weights ~ N(0, 2 / fan_in), biases 0.
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            torch.nn.init.zeros_(layer.bias)
    return model


def train_epochs(model, x, y, epochs, batch, lr, after_step=None, seed=0, after_epoch=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        total = 0.0
        for start in range(0, len(x), batch):
            idx = order[start:start + batch]
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            total += loss.item() * len(idx)
            if after_step:
                after_step(len(idx))
        if after_epoch:
            after_epoch(epoch + 1, total / len(x))


def accuracy(model, data_dir):
    x, y = load(data_dir, "test")
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def worker(rank, args, address):
    torch.set_num_threads(1)
    tether.set_flush_denormals()  # this process's training thread is ours to set
    x, y = load(args.data, "train", args.train_samples)
    shard = slice(rank * len(x) // args.workers, (rank + 1) * len(x) // args.workers)
    model = make_model()
    # The model's own tensors, set to x~ on join and written in place at every exchange.
    client = tether.torch.Worker(model, address, strategy=args.strategy_block, workers=args.workers)
    def log_epoch(epoch, train_loss):  # into the center's run directory (--run-dir)
        client.log(epoch=epoch, train_loss=train_loss, test_accuracy=accuracy(model, args.data))

    train_epochs(model, x[shard], y[shard], args.epochs, args.batch, args.lr, client.step, seed=rank + 1,
                 after_epoch=log_epoch if args.run_dir else None)
    report = client.finish()
    print(f"worker {client.id}: {report['steps']} steps, {report['exchanges']} exchanges, "
          f"{report['seconds_waiting']:.1f} s waiting on the center", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategy", default="adag", help="adag, aeasgd, downpour, averaging, ... (docs/strategies.md)")
    p.add_argument("--window", type=int, help="communication window (default: the strategy's)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train-samples", type=int, help="use only the first N training images (quick checks)")
    p.add_argument("--baseline", action="store_true", help="plain PyTorch in one process instead, for comparison")
    p.add_argument("--min-accuracy", type=float, help="exit 1 when the test accuracy ends below this")
    p.add_argument("--overlap-steps", type=int, help="each exchange's reply lands this many local steps after it went "
                   "out, training going on meanwhile (the strategy's overlap_steps; at most the window)")
    p.add_argument("--run-dir", help="the center writes a run directory here; the workers log into it")
    args = p.parse_args()
    args.strategy_block = {"name": args.strategy}
    if args.window:
        args.strategy_block["communication_window"] = args.window
    if args.overlap_steps:
        args.strategy_block["overlap_steps"] = args.overlap_steps

    started = time.perf_counter()
    model = make_model()
    if args.baseline:
        torch.set_num_threads(1)
        x, y = load(args.data, "train", args.train_samples)
        train_epochs(model, x, y, args.epochs, args.batch, args.lr)
        label = "plain PyTorch, 1 process"
    else:
        initial = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
        center = tether.CenterService(initial, strategy=args.strategy_block, workers=args.workers,
                                      address="tcp://127.0.0.1:*", run_dir=args.run_dir or "")
        # spawn: each worker a fresh interpreter, with none of this process's ZeroMQ state
        processes = [mp.get_context("spawn").Process(target=worker, args=(r, args, center.address))
                     for r in range(args.workers)]
        for proc in processes:
            proc.start()
        final = center.wait()
        for proc in processes:
            proc.join()
        failed = [r for r, proc in enumerate(processes) if proc.exitcode != 0]
        if failed:
            sys.exit(f"workers {failed} failed (exit codes {[processes[r].exitcode for r in failed]})")
        torch.nn.utils.vector_to_parameters(torch.from_numpy(final), model.parameters())
        stats = center.stats()
        label = (f"tether {args.strategy}, {args.workers} worker processes, {stats['updates_applied']} updates, "
                 f"{stats['bytes_received'] + stats['bytes_sent']:,} bytes")
    acc = accuracy(model, args.data)
    print(f"{label}: test accuracy {100 * acc:.2f}% after {args.epochs} epochs, {time.perf_counter() - started:.1f} s")
    if args.min_accuracy is not None and acc < args.min_accuracy:
        sys.exit(f"test accuracy {acc:.4f} is below --min-accuracy {args.min_accuracy}")


if __name__ == "__main__":
    main()
