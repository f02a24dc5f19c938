#!/usr/bin/python3
"""One rank of launch_test.py's jobs: what a user's training script does under torchrun (the
test sets RANK, WORLD_SIZE, MASTER_ADDR, ... itself). argv: strategy ('-': none given),
workers ('-': none given) and optionally "center-only" (rank 0 hosts the center only). Prints one JSON line: rank, world size, shard, and on rank 0 the
center's final counters; an error is printed as {"error": ...} with exit code 1."""
import json
import sys
import time

import torch

import tether
import tether.torch

strategy = None if sys.argv[1] == "-" else sys.argv[1]
workers = None if sys.argv[2] == "-" else int(sys.argv[2])
center_trains = sys.argv[3:] != ["center-only"]
torch.manual_seed(0)  # every rank starts from x~(0)
model = torch.nn.Linear(4, 1)
data = torch.utils.data.TensorDataset(torch.randn(60, 4), torch.randn(60, 1))
started = time.monotonic()
try:
    worker = tether.torch.Worker.from_env(model, strategy=strategy, workers=workers, center_trains=center_trains,
                                          worker_timeout_ms=4000, heartbeat_ms=500)
except tether.TetherError as e:
    print(json.dumps({"error": str(e), "seconds": time.monotonic() - started}))
    sys.exit(1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
shard = worker.shard(data)
for x, y in torch.utils.data.DataLoader(shard, batch_size=5):
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()
    worker.step(len(x))
worker.finish()
result = {"rank": worker.rank, "id": worker.id, "world_size": worker.world_size, "local_rank": worker.local_rank,
          "launcher": worker.launcher.name, "indices": list(shard.indices), "has_center": worker.center is not None, "trains": worker.trains}
if worker.center is not None:
    model.load_state_dict(worker.center.wait(), strict=True)
    result["stats"] = worker.center.stats()
print(json.dumps(result))
