#!/usr/bin/env bash
# The shaped-link MLP with DDP at its own tuned rate and torchft's DiLoCo beside tether's DiLoCo
# H = 50 (float32, int8) (docs/results.md §10, "§8's MLP again"), one cell at a time, seeds
# interleaved.
#   sudo experiments/testbed/run_mlp_torchft.sh [OUT [SEEDS]]   (OUT: runs/testbed; SEEDS: "1 2"; needs the peers' venv)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/testbed}"
specs=experiments/testbed/specs
source experiments/testbed/cell.sh
for seed in ${2:-1 2}; do
  for rate in 10 100 1000; do
    cell grid_torchft torchft-diloco50 "$rate" "$seed"
    cell grid_tether diloco50 "$rate" "$seed"
    cell grid_tether diloco50-int8 "$rate" "$seed"
    if [[ $rate == 10 ]]; then cell grid_ddp ddp-tuned-1.7ep "$rate" "$seed"; else cell grid_ddp ddp-tuned "$rate" "$seed"; fi
  done
done
