#!/usr/bin/env bash
# Reproduces the published comparisons on Fashion-MNIST (docs/results.md): four sweeps, their
# summaries and figures. Resumable: rerunning skips the runs already complete.
#   experiments/reproduce.sh [scaling_workers|window_sweep|sync_vs_async|sync_vs_async_straggler]...
#   (default: all four)
# Sweeps land in sweeps/<name>/; summaries and figures are copied to docs/results/<name>/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
sweeps=("$@")
(( ${#sweeps[@]} )) || sweeps=(scaling_workers window_sweep sync_vs_async sync_vs_async_straggler)
for name in "${sweeps[@]}"; do
  build/tether sweep "experiments/$name.json" --out "sweeps/$name"
  /usr/bin/python3 experiments/plot.py "sweeps/$name" --out "docs/results/$name" >/dev/null
  rm -f "docs/results/$name/accuracy_over_samples.png"
  cp "sweeps/$name/summary.md" "sweeps/$name/summary.csv" "docs/results/$name/"
  echo "figures and summaries: docs/results/$name/"
done
