#!/usr/bin/python3
"""PyTorch DDP (gloo, CPU) on Fashion-MNIST with tether's model, split, shards and batch: the
synchronous baseline the testbed runs beside tether; with --mode torchft, the same loop under
torchft's DiLoCo (examples/python/torchft_diloco.py: each rank a replica group of one with its
own store at MASTER_ADDR / MASTER_PORT, a lighthouse at TORCHFT_LIGHTHOUSE; PyTorch 2.x). One process per rank; the launcher (the
testbed's spec) sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, as torchrun would (Debian's
torchrun does not start on Python 3.11). Rank 0 writes the JSON.

    RANK=0 WORLD_SIZE=4 MASTER_ADDR=198.18.0.1 MASTER_PORT=29500 PYTHONPATH=experiments:examples/python \\
        /usr/bin/python3 experiments/testbed/ddp_baseline.py --model mlp --epochs 2 --out ddp.json

What matches tether (configs/adag.json, configs/cnn-*.json):
- data: the IDX files of Debian's dataset-fashion-mnist, pixels / 255; the validation split of
  src/data/validation_split.cpp (5,000 samples by a partial Fisher-Yates shuffle driven by
  SplitMix64 from seed 0x7e7e0001; validation and training keep the files' order); rank r
  trains on the contiguous shard [n r / W, n (r+1) / W) of the 55,000 left, as
  DatasetView::shard does for worker r;
- model: MLP 784-256-128-10 with ReLU, or the CNN of configs/cnn-*.json; He initialization
  (weights ~ N(0, 2 / fan_in), biases 0) from --seed;
- training: Adam, lr 1e-3, batch 64 per rank, an epoch = one pass of every rank over its shard.
What differs: the weights' initial draws and each epoch's shuffle of a shard come from torch's
and numpy's generators, not tether's std::mt19937_64 (same distributions, other samples);
DDP averages the ranks' gradients at every step (synchronous SGD), where tether's
strategies exchange every tau steps.

Time: `training_seconds` runs from a barrier after setup to the end of the last step, minus
the time rank 0 spent evaluating (the other ranks wait for it at the next all-reduce, so
evaluation would otherwise count as training; tether's center evaluates beside its workers).
The validation curve is taken every --eval-every-s seconds of that clock, and
`time_to_target` is interpolated linearly between the two evaluations around the target.
Bytes: what each rank's network interfaces (all but lo) sent and received during training,
headers included, read from /proc/net/dev (per network namespace: the rank's host's links).
"""

import argparse
import datetime
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import torchft_diloco  # examples/python: the testbed puts it on PYTHONPATH (experiments/README.md)

MASK = (1 << 64) - 1
VALIDATION_SEED = 0x7E7E0001  # kValidationSplitSeed in src/data/validation_split.hpp


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def validation_split(n, count, seed=VALIDATION_SEED):
    """(training indices, validation indices), each in the files' order, as carve_validation."""
    order = list(range(n))
    state = seed
    for i in range(count):
        state, draw = splitmix64(state)
        j = i + draw % (n - i)
        order[i], order[j] = order[j], order[i]
    held = np.zeros(n, dtype=bool)
    held[order[:count]] = True
    return np.flatnonzero(~held), np.flatnonzero(held)


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * k:8 + 4 * k], "big") for k in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(directory, name):
    pick = lambda stem: next(os.path.join(directory, stem + s) for s in ("", ".gz")
                             if os.path.exists(os.path.join(directory, stem + s)))
    images = read_idx(pick(f"{name}-images-idx3-ubyte")).astype(np.float32) / 255.0
    labels = read_idx(pick(f"{name}-labels-idx1-ubyte")).astype(np.int64)
    return torch.from_numpy(images.reshape(-1, 1, 28, 28)), torch.from_numpy(labels)


def build_model(kind, seed):
    torch.manual_seed(seed)
    if kind == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    else:  # configs/cnn-*.json: conv 32 3x3 pad 1, relu, maxpool 2, conv 64 3x3 pad 1, relu, maxpool 2,
        # dense 128, relu, dropout 0.25, dense 10
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, (2.0 / fan_in) ** 0.5)
                m.bias.zero_()
    return model


def evaluate(model, images, labels, chunk=1000):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for k in range(0, len(labels), chunk):
            out = model(images[k:k + chunk])
            loss += F.cross_entropy(out, labels[k:k + chunk], reduction="sum").item()
            correct += (out.argmax(1) == labels[k:k + chunk]).sum().item()
    model.train()
    return correct / len(labels), loss / len(labels)


def interface_bytes():
    """(sent, received) by every interface but lo of this network namespace."""
    sent = received = 0
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name, values = line.split(":", 1)
            if name.strip() != "lo":
                fields = values.split()
                received += int(fields[0])
                sent += int(fields[8])
    return sent, received


def time_to_target(curve, target):
    for a, b in zip(curve, curve[1:]):
        if a["validation_accuracy"] < target <= b["validation_accuracy"]:
            share = (target - a["validation_accuracy"]) / (b["validation_accuracy"] - a["validation_accuracy"])
            return a["seconds"] + share * (b["seconds"] - a["seconds"])
    return 0.0 if curve and curve[0]["validation_accuracy"] >= target else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--mode", choices=["ddp", "torchft"], default="ddp")
    torchft_diloco.add_arguments(p)
    p.add_argument("--epochs", type=float, default=2.0, help="passes over the shards (a fraction stops mid-epoch)")
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--validation", type=int, default=5000)
    p.add_argument("--eval-every-s", type=float, default=1.0, help="seconds of training between evaluations")
    p.add_argument("--target", type=float, default=None, help="validation accuracy (0.88 MLP, 0.91 CNN)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=300, help="gloo's bound on one collective or the rendezvous")
    p.add_argument("--out", default="ddp.json")
    args = p.parse_args()
    target = args.target if args.target is not None else (0.88 if args.model == "mlp" else 0.91)
    torch.set_num_threads(args.threads)

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=args.timeout_s)
    ddp = args.mode == "ddp"
    if ddp:
        # The rendezvous store, held here so that rank 0 can serve it until every other rank is gone.
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, rank == 0, timeout)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    images, labels = load(args.data, "train")
    train_idx, val_idx = validation_split(len(labels), args.validation)
    n = len(train_idx)
    shard = torch.from_numpy(train_idx[n * rank // world:n * (rank + 1) // world])
    # Every rank must take the same number of steps (each is an all-reduce): the shortest shard's.
    steps_per_epoch = -(-(n // world) // args.batch)
    total_steps = int(round(args.epochs * steps_per_epoch))
    val_images, val_labels = images[val_idx], labels[val_idx]
    net = build_model(args.model, args.seed)
    model = nn.parallel.DistributedDataParallel(net) if ddp else net
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    # torchft: the ranks start together (TorchftDiLoCo waits for one quorum), as DDP's do here.
    diloco = torchft_diloco.TorchftDiLoCo(net, [net], optimizer, args, rank, world) if not ddp else None
    rng = torch.Generator().manual_seed(args.seed * 1000003 + rank)

    curve, eval_seconds = [], 0.0

    def record(step):
        nonlocal eval_seconds
        t = time.perf_counter()
        accuracy, loss = evaluate(net, val_images, val_labels)
        curve.append({"seconds": round(t - t0 - eval_seconds, 4), "wall_seconds": round(t - t0, 4),
                      "epoch": round(step / steps_per_epoch, 4), "validation_accuracy": accuracy,
                      "validation_loss": loss})
        eval_seconds += time.perf_counter() - t

    if ddp:
        dist.barrier()
    sent0, received0 = interface_bytes()
    t0 = time.perf_counter()
    if rank == 0:
        record(0)
    step, order, cursor = 0, None, 0
    while step < total_steps:
        if order is None or cursor >= len(order):
            order, cursor = shard[torch.randperm(len(shard), generator=rng)], 0
        batch = order[cursor:cursor + args.batch]
        cursor += args.batch
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images[batch]), labels[batch]).backward()  # backward all-reduces the gradients
        optimizer.step()
        step += 1
        # torchft: only right after a synchronization, where rank 0's parameters are the global
        # model (between two, they are its own local ones).
        synced = diloco is None or diloco.synced(step)
        # torchft: the last synchronization of the run is always evaluated (the steps after it
        # are local; its model is the run's last global one).
        last_sync = diloco is not None and synced and step + diloco.period > total_steps
        since = time.perf_counter() - t0 - eval_seconds - (curve[-1]["seconds"] if curve else 0)
        if rank == 0 and synced and (since >= args.eval_every_s or last_sync):
            record(step)
    if rank == 0 and ddp and curve[-1]["epoch"] < step / steps_per_epoch:
        record(step)  # the final model, before the clock stops (its time is excluded like the others')
    commits = diloco.close(step) if diloco else None
    if ddp:
        dist.barrier()
    end = time.perf_counter()
    sent, received = interface_bytes()
    traffic = [None] * world
    mine = {"rank": rank, "bytes_sent": sent - sent0, "bytes_received": received - received0}
    if ddp:
        dist.all_gather_object(traffic, mine)
    else:
        traffic = [mine]  # each rank's own; the testbed's link_bytes has every host's
    if rank == 0:
        test_images, test_labels = load(args.data, "t10k")
        test_accuracy, test_loss = evaluate(net, test_images, test_labels)
        framework = (f"pytorch {torch.__version__} DDP gloo" if ddp else
                     f"pytorch {torch.__version__} torchft {torchft_diloco.version()} DiLoCo H={args.sync_every} "
                     f"outer {args.outer_lr}")
        result = {"framework": framework, "model": args.model, "workers": world, "torchft_commits": commits,
                  "epochs": args.epochs, "steps": step, "batch_size": args.batch, "learning_rate": args.lr,
                  "seed": args.seed, "parameters": sum(p.numel() for p in model.parameters()),
                  "wall_seconds": round(end - t0, 4), "training_seconds": round(end - t0 - eval_seconds, 4),
                  "eval_seconds": round(eval_seconds, 4), "target_accuracy": target,
                  "time_to_target": time_to_target(curve, target),
                  "final_validation_accuracy": curve[-1]["validation_accuracy"],
                  "best_validation_accuracy": max(c["validation_accuracy"] for c in curve),
                  "final_test_accuracy": test_accuracy, "final_test_loss": test_loss,
                  "interface_bytes": traffic,
                  # torchft: rank 0's own counters only (its host w0 also carries the lighthouse);
                  # the testbed's link_bytes has every host's.
                  "bytes_per_worker": (sum(t["bytes_sent"] + t["bytes_received"] for t in traffic) / world
                                       if ddp else None),
                  "curve": curve}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"{args.mode} {args.model}: {step} steps in {result['training_seconds']:.1f} s of training "
              f"({result['wall_seconds']:.1f} s wall); validation {result['final_validation_accuracy']:.2%}, "
              f"test {test_accuracy:.2%}; time to {target:.0%}: {result['time_to_target']}", flush=True)
    if ddp:
        leave(store, rank, world)


def leave(store, rank, world):
    """Rank 0 serves the store until the others have exited. With torch 1.13, a rank whose
    store server (rank 0) closed first spun at full CPU in its store client's thread on the
    closed socket (poll says readable, recv returns 0) and never exited, even after a final
    barrier: 2 of 7 runs here, one of them after a final barrier."""
    dist.barrier()
    if rank != 0:
        store.add("left", 1)
        sys.stdout.flush()
        os._exit(0)  # no teardown that could still talk to the store
    deadline = time.monotonic() + 30
    while store.add("left", 0) < world - 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # their exits close their connections to the store
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
