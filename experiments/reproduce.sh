#!/usr/bin/env bash
# Reproduces docs/results.md: the sweeps behind each claim, their summaries and figures.
# Resumable: rerunning skips the runs already complete (and those that ended with run_failed).
#   experiments/reproduce.sh [SWEEP...]
# Default, in this order (the learning-rate grids first: docs/results.md says which rate each
# later sweep takes from them): adag_scaling_lr window_tolerance_lr adag_scaling
# window_tolerance easgd_stability sync_sgd_batch cnn_straggler. The earlier, untuned sweeps
# (scaling_workers window_sweep sync_vs_async sync_vs_async_straggler) run when named.
# Sweeps land in sweeps/<name>/; summaries and figures are copied to docs/results/<name>/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
sweeps=("$@")
(( ${#sweeps[@]} )) || sweeps=(adag_scaling_lr window_tolerance_lr adag_scaling window_tolerance easgd_stability
                               sync_sgd_batch cnn_straggler)
for name in "${sweeps[@]}"; do
  build/tether sweep "experiments/$name.json" --out "sweeps/$name"
  /usr/bin/python3 experiments/plot.py "sweeps/$name" --out "docs/results/$name" >/dev/null
  cp "sweeps/$name/summary.md" "sweeps/$name/summary.csv" "sweeps/$name/summary_by_point.csv" "docs/results/$name/"
  echo "figures and summaries: docs/results/$name/"
done
/usr/bin/python3 experiments/claims_figures.py --sweeps sweeps --out docs/results
