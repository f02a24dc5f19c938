#!/usr/bin/env bash
# The language model's async-diloco cells (docs/results.md §12): async-diloco beside tether's
# and torchft's DiLoCo and ADAG at 100 Mbit/s, with w3 at a quarter core (*-straggler), without
# a straggler, and with w3 on a 5x slower link instead (*-slowlink); one cell at a time, seeds
# interleaved. Seed 1 first runs the tuning cells: the outer optimizer and rate with the
# straggler (async-dn-*, async-sgd*, async-nesterov-*), then without one (async-*-h50-int4).
#   sudo experiments/lm/run_async.sh [OUT [SEEDS]]   (OUT: runs/testbed; SEEDS: "1 2 3"; needs the peers' venv)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/testbed}"
specs=experiments/lm/specs
source experiments/testbed/cell.sh
for seed in ${2:-1 2 3}; do
  if [[ $seed == 1 ]]; then  # the tuning cells
    for c in async-dn-h50-int4-straggler async-dn-h50-int4-lr03-straggler async-dn-h10-int4-straggler \
             async-sgd10-h50-int4-straggler async-sgd05-h50-int4-straggler async-sgd03-h50-int4-straggler \
             async-nesterov-h50-int4-straggler async-dn-h50-int4 async-dn-mu05-h50-int4-straggler \
             async-sgd025-h50-int4 async-sgd03-h50-int4 async-dn-mu05-h50-int4 async-sgd05-stale-h50-int4; do
      cell lm_tether "$c" 100 1
    done
  fi
  # outer SGD at 0.3, the best without a straggler, in every case
  cell lm_tether async-sgd03-h50-int4-straggler 100 "$seed"
  cell lm_tether async-sgd03-h50-int4 100 "$seed"
  cell lm_tether async-sgd03-h50-int4-slowlink 100 "$seed"
  cell lm_tether async-sgd05-h50-int4-straggler 100 "$seed"
  cell lm_tether async-dylu-sgd05-h50-int4-straggler 100 "$seed"
  cell lm_tether diloco-h50-int4-straggler 100 "$seed"
  cell lm_torchft diloco-h50-straggler 100 "$seed"
  cell lm_tether adag5-int8-straggler 100 "$seed"
  cell lm_tether async-sgd05-h50-int4 100 "$seed"
  cell lm_tether diloco-h50-int4 100 "$seed"
  cell lm_torchft diloco-h50 100 "$seed"
  # w3 on a 5x slower link (20 Mbit/s), the others at 100 (stop 45)
  cell lm_tether async-sgd05-h50-int4-slowlink 100 "$seed"
  cell lm_tether diloco-h50-int4-slowlink 100 "$seed"
  cell lm_torchft diloco-h50-slowlink 100 "$seed"
done
