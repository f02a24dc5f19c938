#!/usr/bin/python3
"""One rank of ranks_test.py's jobs (the test sets torchrun's variables): a server on every rank
(Worker.from_env(server_placement="ranks")). argv: a strategy block (JSON; rank 0 only, the
others take its), the exchanges to make, and optionally "seed=N" (the model's seed; 0 by
default, as every rank should). Each exchange first sets every parameter to rank + 1 + the
exchange's index, so that averaging gives a closed form. "join=MS" sets join_timeout_ms
(20000); "no-wait" has rank 0 end without worker.center.wait(), 1 s after its finish(), as a
rank 0 that died there would; "run=DIR" gives every rank run_dir=DIR ("{rank}" in it: one per
rank), and rank 0 then loads its checkpoint into a fresh model. Prints one JSON line: rank, the parameters after each exchange,
and on rank 0 the center's final state and counters; an error is printed as {"error": ...}
with exit code 1."""
import json
import os
import sys
import time

import torch

import tether
import tether.torch

strategy = json.loads(sys.argv[1]) if sys.argv[1] != "-" else None
exchanges = int(sys.argv[2])
more = dict(a.split("=") if "=" in a else (a, "1") for a in sys.argv[3:])
seed = int(more.get("seed", 0))
torch.manual_seed(seed)
model = torch.nn.Linear(3, 2)
# "run=DIR": every rank's run_dir (a "{rank}" in it: each its own, as on hosts of their own).
run_dir = {"run_dir": more["run"].format(rank=os.environ["RANK"])} if "run" in more else {}
try:
    worker = tether.torch.Worker.from_env(model, strategy=strategy, server_placement="ranks", worker_timeout_ms=4000,
                                          heartbeat_ms=500, join_timeout_ms=int(more.get("join", 20000)),
                                          **run_dir)
except (tether.TetherError, ValueError) as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(1)
after = []
for e in range(exchanges):
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(worker.rank + 1 + e)
    worker.step(1)
    after.append(sorted({float(v) for p in model.parameters() for v in p.reshape(-1)}))
during = None
if worker.center is not None:  # rank 0, mid-run: x~ gathered from every rank's server
    during = sorted({float(v) for t in worker.center.state_dict().values() for v in t.reshape(-1)})
try:
    worker.finish()
except tether.TetherError as e:  # a rank's server whose final range rank 0 never took
    print(json.dumps({"rank": worker.rank, "error": str(e)}))
    sys.exit(1)
if worker.center is not None and "no-wait" in more:
    time.sleep(1)
    os._exit(0)
result = {"rank": worker.rank, "after": after, "has_center": worker.center is not None, "during": during}
if worker.center is not None:
    state = worker.center.wait()
    result["center"] = sorted({float(v) for t in state.values() for v in t.reshape(-1)})
    result["stats"] = worker.center.stats()
    if run_dir:  # the run directory's checkpoint as the model's state, all ranges
        loaded = tether.torch.load_checkpoint(torch.nn.Linear(3, 2), run_dir["run_dir"])
        result["loaded"] = sorted({float(v) for t in loaded.values() for v in t.reshape(-1)})
print(json.dumps(result))
