#!/usr/bin/python3
"""Replica groups against single-process workers: Fashion-MNIST MLP on W ranks of
one machine, launched with torchrun's variables (set here: Debian's torchrun does not run on
Python 3.11), each rank a process with one thread.

    experiments/sweeps/replica_groups.py [--world 4] [--sizes 1 2] [--seeds 1 2 3] [--strategy JSON]
        [--epochs 3] [--out CSV]

R = 1: W tether workers (tether.torch.Worker.from_env). R > 1: W / R groups, the ranks of a
group kept equal by PyTorch DDP (gloo), only each group's leader a tether worker
(``from_env(replica_size=R)``). Same data (tether's validation split, rank r's contiguous 1/W
shard), model (ddp_baseline.build_model), Adam 1e-3 and batch 64 per rank; CURVE between the
leaders and the center (a fresh TETHER_SECRET per run), as under a real launcher. Prints one line
per run (time, the center's final validation and test accuracy, bytes through the center) and
a mean row per R; --out writes them as CSV. Needs PyTorch and the tether package (docs/python.md);
run from the repository root with PYTHONPATH=experiments:examples/python (experiments/README.md).
"""
import argparse
import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import time

DATA = "/usr/share/datasets/fashion-mnist"
DEFAULT_STRATEGY = json.dumps({"name": "diloco", "communication_window": 10, "outer_learning_rate": 0.25,
                               "outer_momentum": 0.9, "nesterov": True})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(args):
    """One rank: trains its shard, and on rank 0 prints the run's JSON line."""
    import torch
    import tether.torch
    from torch.nn.parallel import DistributedDataParallel
    from testbed import ddp_baseline as common
    torch.set_num_threads(1)
    images, labels = common.load(DATA, "train")
    train_idx, val_idx = common.validation_split(len(labels), 5000)
    train = torch.utils.data.TensorDataset(images[train_idx], labels[train_idx])
    model = common.build_model("mlp", args.seed)
    rank = int(os.environ["RANK"])
    started = time.perf_counter()
    worker = tether.torch.Worker.from_env(model, strategy=args.strategy if rank == 0 else None,
                                          replica_size=args.size)
    trained = DistributedDataParallel(model, process_group=worker.replica_group) if args.size > 1 else model
    optimizer = torch.optim.Adam(trained.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)
    loader = torch.utils.data.DataLoader(worker.shard(train), batch_size=64, shuffle=True, generator=generator)
    for _ in range(args.epochs):
        for x, y in loader:
            torch.nn.functional.cross_entropy(trained(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            worker.step(len(x))
    worker.finish()
    if worker.center is None:
        return
    model.load_state_dict(worker.center.wait())
    seconds = time.perf_counter() - started
    stats = worker.center.stats()
    test_images, test_labels = common.load(DATA, "t10k")
    validation, _ = common.evaluate(model, images[val_idx], labels[val_idx])
    test, _ = common.evaluate(model, test_images, test_labels)
    print(json.dumps({"size": args.size, "seed": args.seed, "seconds": round(seconds, 2), "validation": validation,
                      "test": test, "center_bytes": stats.get("bytes_received", 0) + stats.get("bytes_sent", 0),
                      "exchanges": stats.get("exchanges")}), flush=True)


def run(world, size, seed, strategy, epochs):
    store, center = free_port(), free_port()
    secret = os.urandom(32).hex()  # the ranks' CURVE keys: the launcher's center binds tcp://*
    processes = []
    for rank in range(world):
        env = {k: v for k, v in os.environ.items() if k not in ("TETHER_SECRET", "TORCHELASTIC_RUN_ID")}
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store), TETHER_PORT=str(center),
                   OMP_NUM_THREADS="1", TETHER_SECRET=secret)
        processes.append(subprocess.Popen([sys.executable, __file__, "--rank", "--size", str(size), "--seed", str(seed),
                                           "--strategy", strategy, "--epochs", str(epochs)], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=1800) for p in processes]
    for p, (_, stderr) in zip(processes, outputs):
        if p.returncode != 0:
            raise SystemExit(f"replica_groups: a rank exited {p.returncode}: {stderr[-2000:]}")
    return json.loads(outputs[0][0].strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--strategy", default=DEFAULT_STRATEGY)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--out")
    args = p.parse_args()
    if args.rank:
        return rank_main(args)
    rows = []
    for seed in args.seeds:
        for size in args.sizes:  # interleaved: a slow spell of the machine hits both
            row = run(args.world, size, seed, args.strategy, args.epochs)
            rows.append(row)
            print(f"R={size} seed={seed}: {row['seconds']:.1f} s, validation {row['validation']:.2%}, "
                  f"test {row['test']:.2%}, {row['center_bytes'] / 1e6:.0f} MB through the center", flush=True)
    for size in args.sizes:
        mine = [r for r in rows if r["size"] == size]
        mean = lambda k: statistics.mean(r[k] for r in mine)
        print(f"R={size} ({args.world // size} workers of {size} ranks): {mean('seconds'):.1f} s, validation "
              f"{mean('validation'):.2%}, test {mean('test'):.2%} over {len(mine)} seeds")
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
