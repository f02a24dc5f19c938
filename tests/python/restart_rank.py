#!/usr/bin/python3
"""One rank of restart_test.py's jobs: a user's loop that registers its optimizer and scheduler
with Worker.from_env(state=...) and goes on from worker.start_step, with no condition of its
own on restarts (the test sets torchrun's variables, TORCHELASTIC_RESTART_COUNT among them).
argv: the run directory, the steps of the whole run, the placement ("center" or "ranks"), then
the strategy (JSON; rank 0 only) and "standby=ADDRESS" (standby_address: rank 1 hosts a standby
center there, and every worker fails over to it; "checkpoint=S": checkpoint_seconds, 1 by
default; "stepsR=N": rank R trains N steps only; "join=MS": join_timeout_ms; "buffers": the
model has a BatchNorm's buffers).
Prints a JSON line once joined (where it starts: start_step, the optimizer's and scheduler's
state) and one at the end (on rank 0 the center's final counters); an error as {"error": ...}
with exit code 1."""
import json
import re
import sys
import time

import torch

import tether
import tether.torch

run_dir, steps, placement = sys.argv[1], int(sys.argv[2]), sys.argv[3]
strategy = next((json.loads(a) for a in sys.argv[4:] if a.startswith("{")), None)
extra = {"standby_address": a.split("=", 1)[1] for a in sys.argv[4:] if a.startswith("standby=")}
checkpoint_seconds = next((int(a.split("=", 1)[1]) for a in sys.argv[4:] if a.startswith("checkpoint=")), 1)
# "stepsR=N": rank R trains N steps only (rank 0: it finishes first and waits in worker.center.wait()).
steps_of = {int(m.group(1)): int(m.group(2)) for m in (re.fullmatch(r"steps(\d+)=(\d+)", a) for a in sys.argv[4:]) if m}
extra.update({"join_timeout_ms": int(a.split("=", 1)[1]) for a in sys.argv[4:] if a.startswith("join=")})
torch.manual_seed(0)
middle = [torch.nn.BatchNorm1d(8)] if "buffers" in sys.argv[4:] else []
model = torch.nn.Sequential(torch.nn.Linear(4, 8), *middle, torch.nn.Tanh(), torch.nn.Linear(8, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1000, gamma=0.5)
try:
    worker = tether.torch.Worker.from_env(model, strategy=strategy, run_dir=run_dir, checkpoint_seconds=checkpoint_seconds,
                                          server_placement=placement,
                                          state={"optimizer": optimizer, "scheduler": scheduler},
                                          worker_timeout_ms=4000, heartbeat_ms=500, **extra)
except (tether.TetherError, ValueError) as e:
    print(json.dumps({"error": str(e)}), flush=True)
    sys.exit(1)
print(json.dumps({"rank": worker.rank, "start_step": worker.start_step,
                  "adam_steps": [float(s["step"]) for s in optimizer.state_dict()["state"].values()],
                  "scheduler_epoch": scheduler.last_epoch}), flush=True)
generator = torch.Generator().manual_seed(worker.rank)
steps = steps_of.get(worker.rank, steps)
for step in range(worker.start_step, steps):
    x = torch.randn(16, 4, generator=generator)
    torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True)).backward()
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
    worker.step(len(x))
    time.sleep(0.005)
worker.finish()
result = {"rank": worker.rank, "steps": worker.steps, "has_center": worker.center is not None}
if worker.center is not None:
    waited = time.time()
    model.load_state_dict(worker.center.wait(), strict=True)
    result["wait_s"] = time.time() - waited
    result["stats"] = worker.center.stats()
result["t"] = time.time()
print(json.dumps(result), flush=True)
