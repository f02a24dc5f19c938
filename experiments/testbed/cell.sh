# Sourced from the repository root by the run_*.sh scripts, with $out and $specs set:
# cell SPEC CELL RATE SEED runs one testbed cell of $specs/SPEC.json into $out/SPEC, printing
# its one-line outcome (a finished cell is skipped).
bed=experiments/testbed/testbed.py
cell() {
  "$bed" run "$specs/$1.json" --out "$out/$1" --only "$2,rate_mbit=$3,seed=$4" 2>&1 | grep -E "ok in|failed|timed|skipped|error" || true
}
