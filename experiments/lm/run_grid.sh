#!/usr/bin/env bash
# The language-model grid of docs/results.md §10 and §11 (servers on the ranks), one cell at a
# time (never two at once: 4 ranks already share the 2 cores), every method of a link rate and
# seed in a row, so a slow spell of the machine falls on a seed, not on a method; the cells the
# verdicts rest on first. Reruns skip the cells already done.
#   sudo experiments/lm/run_grid.sh [OUT]   (OUT: runs/testbed; needs the peers' venv)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/testbed}"
specs=experiments/lm/specs
source experiments/testbed/cell.sh
methods() {  # RATE SEED
  cell lm_ddp ddp "$1" "$2"
  cell lm_torchft diloco-h50 "$1" "$2"
  cell lm_torchft streaming-h50-f2 "$1" "$2"
  cell lm_tether diloco-h50 "$1" "$2"
  cell lm_tether diloco-h50-int4 "$1" "$2"
  cell lm_tether streaming-h50-f2-int4 "$1" "$2"
  cell lm_tether adag5-int8 "$1" "$2"
}
cell lm_ddp compute-only 1000 1
methods 10 1
methods 1000 1
methods 10 2
methods 100 1
# torchft's H at the slow link, where a longer window pays most.
cell lm_torchft diloco-h25 10 1
cell lm_torchft diloco-h100 10 1
cell lm_tether diloco-h100-int4 10 1
cell lm_torchft diloco-h100 10 2
cell lm_tether diloco-h100-int4 10 2
# One straggler: w3 at a quarter core (the other ranks get about half a core each of the two).
cell lm_torchft diloco-h50-straggler 100 1
cell lm_tether diloco-h50-int4-straggler 100 1
cell lm_tether adag5-int8-straggler 100 1
# More seeds where the verdicts rest: the headline pair to 5 seeds at 10 Mbit/s and 3 at
# 100 Mbit/s, float32 and torchft's streaming to 3 at 10 Mbit/s, H = 100 and the straggler to
# 2 and 3 seeds.
for seed in 4 5; do
  cell lm_torchft diloco-h50 10 $seed
  cell lm_tether diloco-h50-int4 10 $seed
done
for seed in 2 3; do
  cell lm_torchft diloco-h50 100 $seed
  cell lm_tether diloco-h50-int4 100 $seed
done
cell lm_tether diloco-h50 10 3
cell lm_torchft streaming-h50-f2 10 3
cell lm_tether streaming-h50-f2-int4 10 3
for seed in 2 3; do
  cell lm_torchft diloco-h50-straggler 100 $seed
  cell lm_tether diloco-h50-int4-straggler 100 $seed
  cell lm_tether adag5-int8-straggler 100 $seed
done
# A server on every rank (docs/results.md §11): float32 and int4 beside the single center.
for seed in 1 2 3; do
  for rate in 10 1000 100; do
    cell lm_tether ranks-diloco-h50 $rate $seed
    cell lm_tether ranks-diloco-h50-int4 $rate $seed
  done
done
# The second seed on the fast link last (LM_SEED2_1000=0 leaves it for a later call).
[[ "${LM_SEED2_1000:-1}" == 1 ]] && methods 1000 2
