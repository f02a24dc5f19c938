#!/usr/bin/python3
"""A CNN with BatchNorm on Fashion-MNIST: tether beside PyTorch DDP and a single process.

The model (conv-BN-ReLU-pool twice, then linear-BN-ReLU-linear) has buffers as well as
parameters: BatchNorm's running mean and variance, and its batch counter. With tether the
parameters go through the strategy and the buffers are averaged by the center
(docs/python.md, "Model buffers"); the center's state_dict is loaded into a fresh model and
evaluated (model.eval(): BatchNorm uses those running statistics) on the 10,000 test images.

    /usr/bin/python3 examples/python/batchnorm_cnn.py --mode tether --strategy adag --workers 4
    /usr/bin/python3 examples/python/batchnorm_cnn.py --mode ddp --workers 4      # DDP over gloo
    /usr/bin/python3 examples/python/batchnorm_cnn.py --mode single               # one process
    torchrun --nproc_per_node 4 examples/python/batchnorm_cnn.py --launcher env --mode tether

--launcher spawn (the default) starts the worker processes itself (tether: the center in this
process, on tcp://127.0.0.1 and a port the OS picks); --launcher env reads torchrun's RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT (tether: tether.torch.Worker.from_env; rank 0 hosts the center at MASTER_ADDR,
port MASTER_PORT + 1, and trains too). Every process trains on its 1/N of the training set,
Adam, batch 64 per process; an epoch is one pass over the training set by all together.
"""
import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fashion_mnist import load, train_epochs  # noqa: E402 (the MLP example's IDX reader and loop)

import tether  # noqa: E402
import tether.torch  # noqa: E402


def make_model(seed):
    torch.manual_seed(seed)  # every process builds the same x(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 128), torch.nn.BatchNorm1d(128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))


def images(args, split, limit=None):
    x, y = load(args.data, split, limit)
    return x.reshape(-1, 1, 28, 28), y


def shard(args, rank, world):
    x, y = images(args, "train", args.train_samples)
    part = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    return x[part], y[part]


def train(model, x, y, args, seed, after_step=None):
    # The MLP example's loop: Adam, shuffled batches; the model is in training mode (BatchNorm
    # normalizes by each batch's statistics and updates its running ones).
    train_epochs(model, x, y, args.epochs, args.batch, args.lr, after_step, seed=seed)


def accuracy(model, args):
    x, y = images(args, "test")
    model.eval()
    with torch.no_grad():
        return sum((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item() for i in range(0, len(x), 1000)) / len(x)


def strategy_block(args):
    block = {"name": args.strategy}
    if args.window:
        block["communication_window"] = args.window
    return block


def tether_worker(rank, world, args, address):
    torch.set_num_threads(args.threads)
    tether.set_flush_denormals()  # this process's training thread is ours to set
    model = make_model(args.seed)
    # parameters and buffers, in place; the strategy and worker count are the center's
    tether_train(tether.torch.Worker(model, address), model, rank, world, args)


def tether_train(worker, model, rank, world, args):
    x, y = shard(args, rank, world)  # the rows of worker.shard_indices(len(train set))
    train(model, x, y, args, seed=1000 * args.seed + rank, after_step=worker.step)
    report = worker.finish()
    print(f"worker {worker.id}: {report['steps']} steps, {report['exchanges']} exchanges, "
          f"{report['seconds_waiting']:.1f} s waiting", flush=True)


def ddp_worker(rank, world, args, init_method):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(make_model(args.seed))  # broadcasts rank 0's buffers each forward
    x, y = shard(args, rank, world)
    train(model, x, y, args, seed=1000 * args.seed + rank)
    if rank == 0:
        report(args, f"DDP gloo, {world} processes", accuracy(model.module, args))
    dist.destroy_process_group()


def report(args, label, acc):
    seconds = time.time() - args.started
    print(f"{label}: test accuracy {100 * acc:.2f}% after {args.epochs} epoch(s), seed {args.seed}, {seconds:.1f} s",
          flush=True)
    if args.result:
        with open(args.result, "a") as out:
            out.write(json.dumps({"mode": args.mode, "strategy": args.strategy if args.mode == "tether" else None,
                                  "workers": args.workers, "seed": args.seed, "epochs": args.epochs,
                                  "accuracy": acc, "seconds": round(seconds, 1)}) + "\n")
    if args.min_accuracy is not None and acc < args.min_accuracy:
        sys.exit(f"test accuracy {acc:.4f} is below --min-accuracy {args.min_accuracy}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_tether(args):
    if args.launcher == "env":
        # Rank 0 hosts the center (MASTER_ADDR, MASTER_PORT + 1) and trains too; the others join it.
        torch.set_num_threads(args.threads)
        tether.set_flush_denormals()
        model = make_model(args.seed)
        worker = tether.torch.Worker.from_env(model, strategy=strategy_block(args))
        world = worker.world_size
        tether_train(worker, model, worker.rank, world, args)
        if worker.center is None:
            return
        center = worker.center
    else:
        world = args.workers
        center = tether.torch.CenterService(make_model(args.seed), strategy=strategy_block(args), workers=world,
                                            address="tcp://127.0.0.1:*")
        # spawn: each worker a fresh interpreter, with none of this process's ZeroMQ state
        processes = [mp.get_context("spawn").Process(target=tether_worker, args=(r, world, args, center.address))
                     for r in range(world)]
        for p in processes:
            p.start()
    state = center.wait()  # the complete state_dict: x~ and the averaged buffers
    if args.launcher == "spawn":
        for p in processes:
            p.join()
        if any(p.exitcode != 0 for p in processes):
            sys.exit(f"worker exit codes {[p.exitcode for p in processes]}")
    model = make_model(args.seed)
    model.load_state_dict(state, strict=True)
    stats = center.stats()
    report(args, f"tether {args.strategy}, {world} processes, {stats['updates_applied']} updates", accuracy(model, args))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["tether", "ddp", "single"], default="tether")
    p.add_argument("--launcher", choices=["spawn", "env"], default="spawn")
    p.add_argument("--strategy", default="adag", help="tether: adag, diloco, aeasgd, ... (docs/strategies.md)")
    p.add_argument("--window", type=int, help="tether: communication window (default: the strategy's)")
    p.add_argument("--workers", type=int, default=4, help="processes (--launcher spawn)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train-samples", type=int, help="use only the first N training images (quick checks)")
    p.add_argument("--result", help="append the result as a JSON line to this file")
    p.add_argument("--min-accuracy", type=float, help="exit 1 when the test accuracy ends below this")
    args = p.parse_args()
    args.started = time.time()
    if args.mode == "tether":
        run_tether(args)
    elif args.mode == "ddp" and args.launcher == "env":
        ddp_worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, "env://")
    elif args.mode == "ddp":
        mp.spawn(ddp_worker, args=(args.workers, args, f"tcp://127.0.0.1:{free_port()}"), nprocs=args.workers)
    else:
        torch.set_num_threads(args.threads)
        model = make_model(args.seed)
        x, y = images(args, "train", args.train_samples)
        train(model, x, y, args, seed=1000 * args.seed)
        report(args, "single process", accuracy(model, args))


if __name__ == "__main__":
    main()
