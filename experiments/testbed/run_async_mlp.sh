#!/usr/bin/env bash
# The MLP's async-diloco cells (docs/results.md §12, "The MLP"): async-diloco beside tether's
# and torchft's DiLoCo H = 50 and ADAG on the shaped-link MLP at 1 Gbit/s per host (at
# 100 Mbit/s the center's link, not compute, bounds a float32 round of this MLP and a straggler
# hardly shows), w3 at 0.2 of a core (*-straggler: half its share of the 2 cores among 5 hosts)
# and without a straggler (*-fast); one cell at a time, seeds interleaved. Seed 1 first runs the
# tuning cells (the outer optimizer and rate, by final validation accuracy).
#   sudo experiments/testbed/run_async_mlp.sh [OUT [SEEDS]]   (OUT: runs/testbed_async, where §12 reads them; SEEDS: "1 2 3"; needs the peers' venv)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/testbed_async}"
specs=experiments/testbed/specs
source experiments/testbed/cell.sh
best=async-sgd05  # the straggler cells' tuned outer (below)
for seed in ${2:-1 2 3}; do
  if [[ $seed == 1 ]]; then  # the tuning cells
    for c in async-dn-straggler async-dn-mu05-straggler async-nesterov-straggler \
             async-sgd10-straggler async-sgd05-straggler async-sgd03-straggler; do
      cell grid_tether "$c" 1000 1
    done
  fi
  cell grid_tether "$best-straggler" 1000 "$seed"
  cell grid_tether "$best-dylu-straggler" 1000 "$seed"
  cell grid_tether diloco50-straggler 1000 "$seed"
  cell grid_torchft torchft-diloco50-straggler 1000 "$seed"
  cell grid_tether adag5-straggler 1000 "$seed"
  cell grid_tether "$best-fast" 1000 "$seed"
  cell grid_tether diloco50-fast 1000 "$seed"
  cell grid_torchft torchft-diloco50-fast 1000 "$seed"
done
# Without a straggler, the outer rate tuned again (seed 1: asynchrony changes the best one), and
# the horizon: 3, 10 and 30 epochs (13, 43 and 129 windows a worker) for DiLoCo and async-diloco.
for c in async-sgd025-fast async-sgd0125-fast async-sgd05-stale-fast async-dn-fast async-dn-mu05-fast; do
  cell grid_tether "$c" 1000 1
done
for seed in ${2:-1 2 3}; do
  for e in "" -e10 -e30; do
    for c in diloco50-fast async-sgd025-fast async-dn-fast; do cell grid_tether "$c$e" 1000 "$seed"; done
  done
done
