#!/usr/bin/env bash
# The 10 Mbit/s cells that claims 11 and 12 rest on (docs/results.md §8 and §9), one at a time
# on the quiet machine with seeds interleaved: DDP at tether's rate, stopped at 2 epochs (it
# passes 86% near 1.2), plain DiLoCo H = 50 (int8: the same configuration as grid_tether's
# diloco50-int8; int4) and streaming DiLoCo (int8, int4). Ratios with 95% CIs:
#   experiments/testbed/grid_report.py OUT/grid_ddp OUT/grid_streaming --ratio ddp-2ep/diloco50-int8 ...
#   sudo experiments/testbed/rerun_10mbit.sh [OUT [SEEDS]]   (OUT: runs/testbed_10mbit; SEEDS: "1 2 3")
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/testbed_10mbit}"
specs=experiments/testbed/specs
source experiments/testbed/cell.sh
for seed in ${2:-1 2 3}; do
  cell grid_ddp ddp-2ep 10 "$seed"
  for c in diloco50-int8 stream50-f5-d0-int8 stream50-f5-d5-int8 diloco50-int4 stream50-f5-d5-int4; do
    cell grid_streaming "$c" 10 "$seed"
  done
done
