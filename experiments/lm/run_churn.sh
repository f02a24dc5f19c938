#!/usr/bin/env bash
# The language model under churn (docs/results.md §15): tether (center on rank 0, servers on the
# ranks) and torchft (min replicas 1, live recovery), each fault-free and under one schedule (every
# 30 s one of w1..w3 killed and started again 10 s later), one cell at a time, seeds interleaved.
#   sudo experiments/lm/run_churn.sh [OUT [SEEDS]]   (OUT: runs/testbed; SEEDS: "1 2"; needs the peers' venv)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/testbed}"
specs=experiments/lm/specs
source experiments/testbed/cell.sh
for seed in ${2:-1 2}; do
  for name in diloco-h50 diloco-h50-churn ranks-diloco-h50 ranks-diloco-h50-churn; do
    cell lm_churn_tether "$name" 100 "$seed"
  done
  for name in diloco-h50 diloco-h50-churn; do
    cell lm_churn_torchft "$name" 100 "$seed"
  done
done
