#!/usr/bin/python3
"""One rank of launch_test.py's replica-group job (torchrun's variables set by the test): a
model with BatchNorm, the user's own DDP inside a group of R ranks, tether across the groups.
argv: strategy ('-' on ranks > 0; a name or a JSON object), R, and optionally RANK:STEP (that
rank's process dies after that many steps, as a crashed rank does); REPLICA_SERVERS in the
environment: the center's servers (every rank must know them). Prints one JSON line: rank,
leader, shard, exchanges seen, whether the group was equal after each and its parameters after every step, a
checksum of the final state (parameters and buffers), and on rank 0 the center's counters."""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import tether
import tether.torch


def checksum(model, parameters_only=False):
    tensors = model.parameters() if parameters_only else model.state_dict().values()
    state = torch.cat([t.detach().double().reshape(-1) for t in tensors])
    return hashlib.sha256(state.numpy().tobytes()).hexdigest()[:16]


strategy = None if sys.argv[1] == "-" else json.loads(sys.argv[1]) if sys.argv[1].startswith("{") else sys.argv[1]
size = int(sys.argv[2])
dies = tuple(int(v) for v in sys.argv[3].split(":")) if len(sys.argv) > 3 else (-1, 0)
torch.manual_seed(int(os.environ.get("RANK") or os.environ["SLURM_PROCID"]))  # each rank starts elsewhere: the welcome must make a group equal
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
worker = tether.torch.Worker.from_env(model, strategy=strategy, replica_size=size, worker_timeout_ms=8000,
                                      heartbeat_ms=500, servers=int(os.environ.get("REPLICA_SERVERS", "1")))
sums = [None] * size
dist.all_gather_object(sums, checksum(model), group=worker.replica_group)
joined_equal = len(set(sums)) == 1
ddp = DistributedDataParallel(model, process_group=worker.replica_group)
generator = torch.Generator().manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(160, 4, generator=generator), torch.randn(160, 1, generator=generator))
shard = worker.shard(data)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
exchanges, equal_after, equal_every_step = 0, [], []
for step, (x, y) in enumerate(torch.utils.data.DataLoader(shard, batch_size=4)):
    if (worker.rank, step) == dies:
        os._exit(3)
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()
    changed = worker.step(len(x))
    # The parameters after every step (DDP leaves BatchNorm's running statistics rank-local
    # between its forward passes' broadcasts), the whole state after an exchange.
    dist.all_gather_object(sums, checksum(model, parameters_only=True), group=worker.replica_group)
    equal_every_step.append(len(set(sums)) == 1)
    if changed:
        exchanges += 1
        dist.all_gather_object(sums, checksum(model), group=worker.replica_group)
        equal_after.append(len(set(sums)) == 1)
worker.finish()
result = {"rank": worker.rank, "leader": worker.leader, "id": worker.id, "indices": list(shard.indices),
          "exchanges": exchanges, "joined_equal": joined_equal, "equal_after_exchanges": equal_after,
          "equal_every_step": equal_every_step,
          "final": checksum(model), "has_center": worker.center is not None}
if worker.center is not None:
    center_state = worker.center.wait()
    result["stats"] = worker.center.stats()
    model.load_state_dict(center_state, strict=True)
    result["center_final"] = checksum(model)
print(json.dumps(result))
dist.destroy_process_group()
