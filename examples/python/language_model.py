#!/usr/bin/python3
"""A byte-level decoder-only transformer on the King James Bible, trained in one process, with
PyTorch DDP, with torchft's DiLoCo or streaming DiLoCo, or through tether (any strategy:
Worker.from_env under torchrun-style variables).

The corpus is Debian's bible-kjv (`bible "Gen1:1-Rev22:21"`, 4.3 MB), split by book: every 11th
book from the 6th is the test set, every 11th from the 11th the validation set, the other 54
books train. Tokens are bytes (256 of them). The model: token embedding tied to the output head,
learned positions, pre-LayerNorm blocks of causal self-attention and a GELU MLP, dropout; AdamW
with linear warm-up and cosine decay, gradient clipping. Validation loss is in nats per token;
with byte tokens, bits per byte = nats / ln 2.

  python3 examples/python/language_model.py --preset small                      # one process
  python3 examples/python/language_model.py --mode tether --processes 4 \\
      --strategy '{"name": "diloco", "communication_window": 50}'                # 4 ranks, rank 0 the center
  python3 examples/python/language_model.py --mode ddp --processes 4            # the same loop under DDP (gloo)
  python3 examples/python/language_model.py --mode torchft --processes 4 --sync-every 50   # torchft's DiLoCo
  torchrun --nproc_per_node 8 examples/python/language_model.py --mode tether   # one rank per process
  python3 examples/python/language_model.py --mode tether --processes 4 --replica-size 2   # 2 groups of 2 (DDP inside)

With --processes N the script starts N ranks of itself with torchrun's variables on this host;
under torchrun (or srun, mpirun) each rank is started by the launcher instead. Rank 0 prints one
line per evaluation and, with --out, writes the curve and the final figures as JSON (rewritten
after every evaluation, so a run stopped early keeps its curve).

torchft (--mode torchft, PyTorch 2.x and torchft: scripts/install-deps.sh --peers): every rank is
a replica group of one, with torchft's Manager (gloo, synchronous quorum, all ranks required) and
torchft.local_sgd.DiLoCo: the inner AdamW every step, every --sync-every steps an all-reduce of
the pseudo-gradient (bucketized: one flat buffer) and the outer Nesterov SGD (--outer-lr,
--outer-momentum); --fragments F > 1 is streaming DiLoCo (fragment f: a contiguous run of the
model's modules; --fragment-delay steps of overlap). It needs a lighthouse
(`torchft_lighthouse`, TORCHFT_LIGHTHOUSE) and each rank's own store at MASTER_ADDR /
MASTER_PORT, which this script opens (under --processes it starts the lighthouse too).

Clock: `seconds` in the curve is training time on rank 0, its own evaluations excluded (the other
ranks wait for rank 0 at the next synchronization, not longer). Rank 0 evaluates after every
--eval-every steps (torchft: only those that end a synchronization). With --eval-every a
multiple of the window, a DiLoCo rank's parameters are then the global model, so evaluating
costs no bytes; with streaming DiLoCo only the fragment just synchronized is global, the others
carry their local steps since their own synchronization.
"""
import argparse
import json
import math
import os
import re
import secrets
import socket
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchft_diloco  # beside this script

PRESETS = {  # d_model, layers, heads, context, batch, steps, learning rate
    "tiny": dict(d_model=64, layers=2, heads=2, context=64, batch=16, steps=60, lr=3e-3),  # the suite's
    # The testbed's: 4 ranks on 2 cores, 0.44M parameters (1.75 MB in float32), 0.034 s a step alone
    "testbed": dict(d_model=128, layers=2, heads=4, context=64, batch=16, steps=1000, lr=3e-3),
    "small": dict(d_model=128, layers=4, heads=4, context=128, batch=32, steps=1500, lr=2e-3),  # 2 cores, minutes
    "gpu": dict(d_model=512, layers=8, heads=8, context=256, batch=64, steps=20000, lr=6e-4),
}


def load_corpus(bible="bible"):
    """The three splits as uint8 arrays of UTF-8 bytes, split by book."""
    text = subprocess.run([bible, "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    books, name = [], None
    for line in text.splitlines():
        heading = re.fullmatch(r"(\S.*) (\d+)", line)
        if heading and heading.group(1) != name:  # "Genesis 1": a new book begins
            name = heading.group(1)
            books.append([])
        if books:
            books[-1].append(re.sub(r"^\s+\d+ ", "", line))  # the verse numbers are not English
    if len(books) != 66:
        raise RuntimeError(f"{bible}: expected the 66 books of the KJV, found {len(books)}")
    splits = {"train": [], "validation": [], "test": []}
    for i, book in enumerate(books):
        split = "test" if i % 11 == 5 else "validation" if i % 11 == 10 else "train"
        splits[split].append("\n".join(book) + "\n")
    return {k: np.frombuffer("".join(v).encode(), dtype=np.uint8) for k, v in splits.items()}


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(dropout)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        # Causal: position t attends to positions up to t. Made per call, not a buffer: the
        # model's buffers are state tether averages, and a mask is none.
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        weights = self.drop(scores.masked_fill(future, float("-inf")).softmax(-1))
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.drop(self.attention(self.ln1(x)))
        return x + self.drop(self.mlp(self.ln2(x)))


class LanguageModel(nn.Module):
    def __init__(self, d_model, layers, heads, context, dropout=0.1, vocabulary=256, **_):
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, d_model)
        self.positions = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocabulary, bias=False)
        self.head.weight = self.tokens.weight  # tied: one tensor, two names in the state_dict
        self.drop = nn.Dropout(dropout)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets=None):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tokens(idx) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def windows(data, starts, context):
    """Inputs and targets of the windows of `context` bytes starting at `starts`."""
    x = np.stack([data[s:s + context] for s in starts]).astype(np.int64)
    y = np.stack([data[s + 1:s + 1 + context] for s in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


@torch.no_grad()
def evaluate(model, data, context, count=256):
    """Mean loss in nats per token over `count` fixed windows spread over `data`."""
    model.eval()
    starts = np.linspace(0, len(data) - context - 1, count).astype(np.int64)
    x, y = windows(data, starts, context)
    loss = model(x, y).item()
    model.train()
    return loss


def schedule(step, steps, warmup):
    """The learning rate's factor: linear warm-up, then cosine decay to a tenth."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def tether_option(text):
    """--option KEY=VALUE: VALUE as JSON where it parses (2, true, 0.5), else the string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"language_model: --option {text!r}: expected KEY=VALUE, e.g. codec=int8 or servers=2")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def fragments_of(model, count):
    """Streaming DiLoCo's fragments: the model's modules in order (embeddings, blocks, final
    norm) cut into `count` contiguous runs of about equal parameter counts. The head is tied to
    the token embedding and lives in the first fragment with it."""
    parts = [nn.ModuleList([model.tokens, model.positions])] + list(model.blocks) + [model.ln]
    if count > len(parts):
        raise ValueError(f"--fragments {count}: this model has {len(parts)} parts to cut (embeddings, "
                         f"{len(model.blocks)} blocks, final norm)")
    sizes = [sum(p.numel() for p in part.parameters()) for part in parts]
    total, cuts, acc = sum(sizes), [], 0
    for i, size in enumerate(sizes):
        acc += size
        if len(cuts) < count - 1 and acc >= total * (len(cuts) + 1) / count and len(parts) - i - 1 >= count - 1 - len(cuts):
            cuts.append(i + 1)
    bounds = [0] + cuts + [len(parts)]
    return [nn.ModuleList(parts[a:b]) for a, b in zip(bounds, bounds[1:])]


def train(args):
    if args.replica_size > 1 and args.mode != "tether":
        raise ValueError(f"--replica-size {args.replica_size}: replica groups are tether's (--mode tether)")
    if args.mode == "torchft" and args.budget_s:
        raise ValueError("--budget-s: torchft's replicas must stop at the same step; give --steps instead")
    if args.replica_size > 1 and args.budget_s:
        # A group's ranks must stop at the same step (they broadcast every step), and rank 0's
        # clock leaves out evaluations its partners wait through.
        raise ValueError("--budget-s with --replica-size: a replica group's ranks must stop together; give --steps")
    config = dict(PRESETS[args.preset], **{k: v for k, v in (("steps", args.steps), ("lr", args.lr)) if v})
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    corpus = load_corpus(args.bible)
    model = LanguageModel(dropout=args.dropout, **config)
    worker, rank, world = None, int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if args.mode == "tether":
        import tether.torch
        strategy = json.loads(args.strategy) if args.strategy.lstrip().startswith("{") else args.strategy
        options = dict(tether_option(o) for o in args.option)
        worker = tether.torch.Worker.from_env(model, strategy=strategy, replica_size=args.replica_size,
                                              **options)  # rank 0 also hosts the center
        rank, world = worker.rank, worker.world_size
        if args.replica_size > 1:  # the group trains one replica with DDP inside; its leader exchanges
            model = nn.parallel.DistributedDataParallel(model, process_group=worker.replica_group)
    elif args.mode == "ddp" and world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        model = nn.parallel.DistributedDataParallel(model)
    train_data = corpus["train"]
    shard = len(train_data) // world  # each rank samples its own contiguous shard
    shard_data = train_data[rank * shard:(rank + 1) * shard]
    decay = [p for p in model.parameters() if p.dim() > 1]
    rest = [p for p in model.parameters() if p.dim() <= 1]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                  lr=config["lr"], betas=(0.9, 0.95))
    warmup = max(1, config["steps"] // 20)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: schedule(s, config["steps"], warmup))
    net = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    diloco = None
    if args.mode == "torchft":
        fragments = fragments_of(net, args.fragments) if args.fragments > 1 else [net]
        diloco = torchft_diloco.TorchftDiLoCo(net, fragments, optimizer, args, rank, world)
    rng = np.random.default_rng(args.seed + rank)
    curve, started, evaluating = [], time.time(), 0.0  # evaluating: seconds rank 0 spent evaluating
    summary = {"mode": args.mode, "ranks": world, "replica_size": args.replica_size, "preset": args.preset,
               "config": config,
               "parameters": sum(p.numel() for p in net.parameters()), "curve": curve,
               "torch": torch.__version__, "argv": sys.argv[1:]}
    if args.mode == "torchft":
        summary["torchft"] = torchft_diloco.version()

    def training_seconds():
        return time.time() - started - evaluating

    def record(step):
        nonlocal evaluating
        if rank != 0:
            return
        began = time.time()
        loss = evaluate(net, corpus["validation"], config["context"])
        curve.append({"step": step, "seconds": began - started - evaluating, "validation_loss": loss,
                      "bits_per_byte": loss / math.log(2)})
        evaluating += time.time() - began
        print(f"step {step:6d}  {curve[-1]['seconds']:7.1f} s  validation {loss:.4f} nats/token "
              f"{loss / math.log(2):.4f} bits/byte", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(summary, f, indent=1)

    def over_budget():
        """Whether the run stops here: this rank's training time past --budget-s. Under DDP every
        rank must stop at the same step, so rank 0's decision is all-reduced (4 bytes); a tether
        worker may stop on its own (the center goes on with the others)."""
        lockstep = args.mode == "ddp" and world > 1
        past = training_seconds() >= args.budget_s and (rank == 0 or not lockstep)
        stop = torch.tensor([1.0 if past else 0.0])
        if lockstep:
            import torch.distributed as dist
            dist.all_reduce(stop)
        return stop.item() > 0

    record(0)
    for step in range(1, config["steps"] + 1):
        starts = rng.integers(0, len(shard_data) - config["context"] - 1, config["batch"])
        x, y = windows(shard_data, starts, config["context"])
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if worker is not None:
            worker.step(config["batch"])
        # torchft: only where a synchronization just ended, so that evaluating sends nothing.
        due = step % args.eval_every == 0 and (diloco is None or diloco.synced(step))
        if due or step == config["steps"]:
            record(step)
            if args.budget_s and over_budget():
                summary["stopped_at_budget"] = step
                break
    summary["training_seconds"] = training_seconds()
    if diloco is not None:
        summary["torchft_commits"] = diloco.close(step)
    final = net.state_dict()
    if worker is not None:
        worker.finish()
        if worker.center is not None:
            final = worker.center.wait()  # x~ and b~: the run's model, as a complete state_dict
            net.load_state_dict(final, strict=True)
    summary.update(final_validation_loss=evaluate(net, corpus["validation"], config["context"]),
                   final_test_loss=evaluate(net, corpus["test"], config["context"]),
                   wall_seconds=time.time() - started)
    if rank == 0:
        print(f"final: validation {summary['final_validation_loss']:.4f} nats/token, test "
              f"{summary['final_test_loss']:.4f} ({summary['final_test_loss'] / math.log(2):.4f} bits/byte), "
              f"{summary['parameters']} parameters, {summary['wall_seconds']:.1f} s", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(summary, f, indent=1)
            if args.save_model:
                torch.save(final, args.save_model)


def launch(args):
    """--processes N: N ranks of this script on this host, with torchrun's variables."""
    port = free_port()
    argv = [a for a in sys.argv[1:]]
    at = argv.index("--processes")
    del argv[at:at + 2]
    secret = secrets.token_hex(32)  # as `tether keygen --secret` makes one: every rank derives the keys from it
    ranks, lighthouse, extra = [], None, {}
    if args.mode == "torchft":
        lighthouse_port = free_port()
        lighthouse = subprocess.Popen([torchft_diloco.lighthouse_program(), "--min_replicas", str(args.processes),
                                       "--quorum_tick_ms", "100", "--join_timeout_ms", "10000",
                                       "--bind", f"127.0.0.1:{lighthouse_port}"])
        extra["TORCHFT_LIGHTHOUSE"] = f"http://127.0.0.1:{lighthouse_port}"
    try:
        for rank in range(args.processes):
            # torchft: every rank is a replica group of one with a store of its own.
            rank_port = free_port() if args.mode == "torchft" else port
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.processes), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(args.processes), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(rank_port),
                       TETHER_SECRET=secret, **extra)
            ranks.append(subprocess.Popen([sys.executable, __file__, *argv], env=env))
        codes = [r.wait() for r in ranks]
    finally:
        for r in ranks + ([lighthouse] if lighthouse else []):
            if r.poll() is None:
                r.terminate()
                r.wait()
    if any(codes):
        sys.exit(f"language_model: ranks exited {codes}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["single", "ddp", "tether", "torchft"], default="single")
    p.add_argument("--strategy", default="diloco", help="tether's strategy: a name or its JSON block")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="tether: an option of Worker.from_env (codec=int8, servers=2, ...); repeatable")
    p.add_argument("--replica-size", type=int, default=1,
                   help="tether: replica groups of this many ranks (DDP inside a group, its leader a worker)")
    p.add_argument("--processes", type=int, default=0, help="start this many ranks on this host")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small")
    p.add_argument("--steps", type=int, help="local steps per rank (default: the preset's)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=100, help="rank 0 evaluates every this many steps")
    p.add_argument("--budget-s", type=float, default=0.0,
                   help="stop at the first evaluation past this much training time (not with torchft)")
    torchft_diloco.add_arguments(p)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bible", default="bible", help="the bible-kjv program (Debian's package bible-kjv)")
    p.add_argument("--out", help="rank 0 writes the curve and final figures here (JSON)")
    p.add_argument("--save-model", help="with --out: rank 0 saves the final state_dict here (torch.save)")
    args = p.parse_args()
    if args.processes > 0 and "RANK" not in os.environ:
        launch(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
