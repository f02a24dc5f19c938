#!/usr/bin/python3
"""One PyTorch loop, two ways to share it among 4 ranks, with one rank 3x slower: synchronous
DiLoCo over a ring all-reduce (gloo, float32) against tether's async-diloco at its defaults with
leased data (tether.torch.Worker.batches). The MLP and data of ddp_baseline.py (Fashion-MNIST,
784-256-128-10, Adam 1e-3, batch 64, H = 50, 3 epochs); rank 0 evaluates its own parameters on
the 5,000 validation samples right after an exchange, at most once every --eval-every-s seconds
of training (its evaluation time is taken off the clock), and `time_to_target` is interpolated
between the evaluations around --target.

    sudo /usr/bin/python3 experiments/testbed/straggler_mlp.py --mode tether --seed 1 --out cell.json

The ranks run on this machine over 127.0.0.1, on ports the OS picks; the slow rank (--slow-rank,
default 3) runs in a cgroup of --slow-cores of a core (0.2: about 3x slower than the others on
2 shared cores; 0 or less: no straggler). The cgroup is removed on exit.

- ring: every rank trains its fixed shard (ddp_baseline.py's), every H steps the pseudo-gradient
  x~ - x_i is averaged by all_reduce and x~ takes an outer Nesterov step (lr 0.7, momentum 0.9,
  tether's diloco defaults); every rank takes the same number of steps, the slow one's pace.
- tether: Worker.from_env(model, strategy async-diloco with H), rank 0 hosting the
  center and training; each rank's minibatches come from worker.batches() until the 3 epochs'
  positions are handed out; the summary gives each rank's share and idle time at the end.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    """Starts the ranks, the slow one in its cgroup, and waits for them; rank 0 writes --out."""
    sys.path.insert(0, HERE)
    from shaping import CpuQuota
    # A SIGTERM (a timeout, a kill) unwinds through the finally below: the ranks and the cgroup go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    quota = CpuQuota(f"tbed-straggler-{os.getpid()}", args.slow_cores) if args.slow_cores > 0 else None
    port = free_port()
    procs = []
    try:
        for rank in range(args.world):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.world), LOCAL_RANK=str(rank),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
            join = quota.join if quota and rank == args.slow_rank else None
            procs.append(subprocess.Popen([sys.executable, __file__, "--rank-process"] + sys.argv[1:], env=env,
                                          preexec_fn=join))
        deadline = time.monotonic() + args.timeout_s
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        if any(c != 0 for c in codes):
            raise SystemExit(f"straggler_mlp: ranks exited {codes}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if quota:
            quota.remove()


def rank_main(args):
    import torch
    import torch.nn.functional as F
    sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "examples", "python")]
    from ddp_baseline import build_model, evaluate, load, time_to_target, validation_split
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    images, labels = load(args.data, "train")
    train_idx, val_idx = validation_split(len(labels), 5000)
    train_idx = torch.from_numpy(train_idx)
    n = len(train_idx)
    val_images, val_labels = images[val_idx], labels[val_idx]
    net = build_model("mlp", args.seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
    curve, eval_seconds, samples = [], 0.0, 0

    def record():
        nonlocal eval_seconds
        t = time.perf_counter()
        accuracy, loss = evaluate(net, val_images, val_labels)
        curve.append({"seconds": round(t - t0 - eval_seconds, 4), "validation_accuracy": accuracy,
                      "validation_loss": loss})
        eval_seconds += time.perf_counter() - t

    def train_on(rows):
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(net(images[rows]), labels[rows]).backward()
        optimizer.step()

    def maybe_record():
        if rank == 0 and time.perf_counter() - t0 - eval_seconds - curve[-1]["seconds"] >= args.eval_every_s:
            record()

    extra = {}
    if args.mode == "ring":
        import datetime
        import torch.distributed as dist
        from ddp_baseline import leave
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, rank == 0,
                              datetime.timedelta(seconds=300))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
        shard = train_idx[n * rank // world:n * (rank + 1) // world]
        total_steps = args.epochs * (-(-(n // world) // args.batch))
        center = [p.detach().clone() for p in net.parameters()]
        outer = torch.optim.SGD(center, lr=0.7, momentum=0.9, nesterov=True)
        rng = torch.Generator().manual_seed(args.seed * 1000003 + rank)
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            record()
        order, cursor = None, 0
        for step in range(1, total_steps + 1):
            if order is None or cursor >= len(order):
                order, cursor = shard[torch.randperm(len(shard), generator=rng)], 0
            rows = order[cursor:cursor + args.batch]
            cursor += args.batch
            train_on(rows)
            samples += len(rows)
            if step % args.window == 0 or step == total_steps:
                with torch.no_grad():
                    flat = torch.cat([(c - p).reshape(-1) for c, p in zip(center, net.parameters())])
                    dist.all_reduce(flat)
                    flat /= world
                    offset = 0
                    for c in center:
                        c.grad = flat[offset:offset + c.numel()].view_as(c).clone()
                        offset += c.numel()
                    outer.step()
                    for c, p in zip(center, net.parameters()):
                        p.copy_(c)
                maybe_record()
        if rank == 0:
            record()
        end = time.perf_counter()
        shares = [None] * world
        dist.all_gather_object(shares, samples)
        extra = {"rank_samples": shares}
        framework = f"pytorch {torch.__version__} gloo ring DiLoCo H={args.window} outer nesterov 0.7/0.9"
    else:
        import tether.torch
        strategy = {"name": "async-diloco", "communication_window": args.window, **json.loads(args.strategy)}
        worker = tether.torch.Worker.from_env(net, strategy=strategy, insecure=True)
        t0 = time.perf_counter()
        if rank == 0:
            record()
        for rows in worker.batches(n, args.batch, epochs=args.epochs, seed=args.seed):
            train_on(train_idx[rows])
            samples += len(rows)
            if worker.step(len(rows)):
                maybe_record()
        worker.finish()
        if rank == 0:
            net.load_state_dict(worker.center.wait())  # the final x~, after every rank's last exchange
        end = time.perf_counter()  # rank 0: the run's end, the last rank's bye
        if rank == 0:
            stats = worker.center.stats()
            record()
            extra = {"worker_samples": stats.get("worker_samples"), "worker_idle_seconds": stats.get("worker_idle_seconds"),
                     "leases": stats.get("leases")}
        framework = f"pytorch {torch.__version__} tether {tether.__version__} {json.dumps(strategy)}, leases"
    if rank == 0:
        target = args.target
        result = {"framework": framework, "mode": args.mode, "seed": args.seed, "slow_cores": args.slow_cores,
                  "training_seconds": round(end - t0 - eval_seconds, 4), "time_to_target": time_to_target(curve, target),
                  "target_accuracy": target, "final_validation_accuracy": curve[-1]["validation_accuracy"],
                  "final_validation_loss": curve[-1]["validation_loss"], "samples": samples, "curve": curve, **extra}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"{args.mode} seed {args.seed} slow {args.slow_cores}: time to {target:.0%} {result['time_to_target']} s, "
              f"{result['training_seconds']:.1f} s in all, final validation {result['final_validation_accuracy']:.2%} "
              f"loss {result['final_validation_loss']:.4f}", flush=True)
    if args.mode == "ring":
        leave(store, rank, world)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["ring", "tether"], required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--window", type=int, default=50)
    p.add_argument("--strategy", default="{}", help="tether: JSON keys over async-diloco's defaults, e.g. '{\"outer\": \"sgd\"}'")
    p.add_argument("--target", type=float, default=0.86)
    p.add_argument("--eval-every-s", type=float, default=0.5)
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--slow-rank", type=int, default=3)
    p.add_argument("--slow-cores", type=float, default=0.2)
    p.add_argument("--timeout-s", type=float, default=600)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--out", default="straggler_mlp.json")
    p.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    (rank_main if args.rank_process else launch)(args)


if __name__ == "__main__":
    main()
