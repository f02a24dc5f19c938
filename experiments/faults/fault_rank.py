#!/usr/bin/python3
"""One rank of fault_table.py's jobs: a user's PyTorch loop (a small MLP on a synthetic
regression, Adam, batch 16) under torchrun's variables, its optimizer and scheduler registered
with Worker.from_env(state=...), going on from worker.start_step. argv: the run directory, the
steps of the whole run, the placement ("center" or "ranks"), the strategy (JSON; "-" on ranks
other than 0) and optionally "resume" (a rank restarted alone by a supervisor: resume=True) and
"standby=ADDRESS" (standby_address: rank 1 a standby center).
Prints a JSON line every 10 steps ({"step", "t"}: time.time()) and one at the end ({"done"},
on rank 0 with the center's counters)."""
import json
import sys
import time

import torch

import tether
import tether.torch

run_dir, steps, placement = sys.argv[1], int(sys.argv[2]), sys.argv[3]
strategy = None if sys.argv[4] == "-" else json.loads(sys.argv[4])
extra = {"resume": True} if "resume" in sys.argv[5:] else {}
extra.update({"standby_address": a.split("=", 1)[1] for a in sys.argv[5:] if a.startswith("standby=")})
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10_000, gamma=0.5)
worker = tether.torch.Worker.from_env(model, strategy=strategy, run_dir=run_dir, server_placement=placement,
                                      state={"optimizer": optimizer, "scheduler": scheduler}, checkpoint_seconds=1,
                                      worker_timeout_ms=3000, heartbeat_ms=500, center_restart_ms=15000, **extra)
print(json.dumps({"start_step": worker.start_step, "t": time.time()}), flush=True)
generator = torch.Generator().manual_seed(worker.rank)
for step in range(worker.start_step, steps):
    x = torch.randn(16, 32, generator=generator)
    torch.nn.functional.mse_loss(model(x), x[:, :1] * x[:, 1:2]).backward()
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
    worker.step(len(x))
    if (step + 1) % 10 == 0:
        print(json.dumps({"step": step + 1, "t": time.time()}), flush=True)
    time.sleep(0.004)
worker.finish()
result = {"done": worker.steps, "t": time.time()}
if worker.center is not None:
    model.load_state_dict(worker.center.wait(), strict=True)
    stats = worker.center.stats()
    result.update(samples=stats.get("worker_samples"), bytes_sent=stats.get("bytes_sent"),
                  bytes_received=stats.get("bytes_received"))
print(json.dumps(result), flush=True)
