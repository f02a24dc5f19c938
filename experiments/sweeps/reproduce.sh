#!/usr/bin/env bash
# The loopback sweeps of docs/results.md (one machine, embedded workers), or those named. By
# default: the tuned tables (§1 staleness_adag staleness_downpour staleness_dynsgd, §6
# diloco_horizon: each cell's rate tuned on validation until strictly inside its grid, then 5
# seeds, by tune.py --final-repeats 5; tables by ci_table.py), §1c warmstart, §9
# streaming_diloco streaming_mixing streaming_diloco_cnn, the scripted §3 easgd_boundary and §7
# goyal_scaling, and the one-rate sweeps adag_scaling_lr window_tolerance_lr adag_scaling
# window_tolerance easgd_stability sync_sgd_batch cnn_straggler; then claims_figures.py. Named,
# it also runs "Earlier sweeps" (scaling_workers window_sweep sync_vs_async
# sync_vs_async_straggler) and main_schedule, as plain sweeps with plot.py's figures. Not here:
# the shaped-link testbed's cells (experiments/testbed, experiments/lm; root) and the
# benchmarks (experiments/bench). What runs what: experiments/README.md.
#   experiments/sweeps/reproduce.sh [SWEEP...]
# Resumable: rerunning skips the runs already complete (and those that ended with run_failed).
# Sweeps land in sweeps/<name>/; summaries, tables and figures are copied to docs/results/<name>/.
# TETHER=path uses another binary (say, a copy that a rebuild cannot change mid-run); JOBS=N
# runs N at once (default 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="experiments:examples/python${PYTHONPATH:+:$PYTHONPATH}"  # experiments/README.md, "Running"
scripts/build.sh >/dev/null
tether=${TETHER:-build/tether}
jobs=${JOBS:-2}
py=/usr/bin/python3
lr=training.optimizer.learning_rate
sweeps=("$@")
(( ${#sweeps[@]} )) || sweeps=(staleness_adag staleness_downpour staleness_dynsgd warmstart diloco_horizon streaming_diloco streaming_mixing
                               streaming_diloco_cnn easgd_boundary
                               goyal_scaling adag_scaling_lr window_tolerance_lr adag_scaling window_tolerance
                               easgd_stability sync_sgd_batch cnn_straggler)
for name in "${sweeps[@]}"; do
  out="sweeps/$name" docs="docs/results/$name"
  mkdir -p "$docs"
  case $name in
    staleness_*|diloco_horizon)
      key=$lr; [[ $name == diloco_horizon ]] && key=strategy.outer_learning_rate
      $py experiments/sweeps/tune.py "experiments/sweeps/$name.json" --key "$key" --final-repeats 5 --jobs "$jobs" --out "$out" --tether "$tether"
      rows=cluster.workers; [[ $name == diloco_horizon ]] && rows=strategy.name
      $py experiments/sweeps/ci_table.py "$out" --rows "$rows" --cols strategy.communication_window --percent --csv "$docs/ci_table.csv" \
        > "$docs/ci_table.md"
      cp "$out"/{tune.md,tune.csv,tune_result.csv,summary.md,summary.csv,summary_by_point.csv} "$docs/" ;;
    warmstart)
      "$tether" sweep "experiments/sweeps/$name.json" --out "$out" --jobs "$jobs" || true
      $py experiments/sweeps/ci_table.py "$out" --sweep "$PWD/experiments/sweeps/$name.json" --rows strategy.name,cluster.workers \
        --cols cluster.warmstart_samples --percent --csv "$docs/ci_table.csv" > "$docs/ci_table.md"
      cp "$out"/{summary.md,summary.csv} "$docs/" ;;
    streaming_*)
      "$tether" sweep "experiments/sweeps/$name.json" --out "$out" --jobs "$([[ $name == *cnn ]] && echo 1 || echo "$jobs")" || true
      $py experiments/sweeps/streaming_bytes.py "$out" --csv "$docs/table.csv" > "$docs/table.md" ;;
    easgd_boundary)
      $py experiments/sweeps/easgd_boundary.py --out "$out" --jobs "$jobs" --tether "$tether"
      cp "$out"/boundary.{csv,md,png} "$docs/" ;;
    goyal_scaling)
      $py experiments/sweeps/goyal_scaling.py --out "$out" --jobs "$jobs" --tether "$tether"
      cp "$out"/goyal.csv "$docs/"; cp "$out"/base/tune.md "$docs/base_tune.md"
      cp "$out"/base/summary.csv "$docs/base_summary.csv" ;;
    *)
      "$tether" sweep "experiments/sweeps/$name.json" --out "$out" --jobs "$jobs" || true  # failed runs are results
      $py experiments/plot.py "$out" --out "$docs" >/dev/null
      cp "$out"/{summary.md,summary.csv,summary_by_point.csv} "$docs/" ;;
  esac
  echo "tables and summaries: $docs/"
done
$py experiments/sweeps/claims_figures.py --sweeps sweeps --out docs/results
