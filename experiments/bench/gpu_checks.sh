#!/usr/bin/env bash
# The GPU checks, in one go, on a machine with an NVIDIA GPU: the CUDA test suite, real runs
# on `device: cuda` (sequential, and adag / averaging with 4 workers on the one GPU, embedded
# and as processes), and experiments/bench/bench_gpu.py beside PyTorch. Logs and JSON go to OUT_DIR.
#   experiments/bench/gpu_checks.sh [BIN_DIR [OUT_DIR]]
# BIN_DIR holds tether, tether-bench-gpu and test_cuda_backend (default: the build tree);
# libtether-cuda.so must be where the loader finds it (beside libtether, or LD_LIBRARY_PATH).
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-}
out=${2:-runs/gpu-checks}
mkdir -p "$out"

tether=${bin:-build}/tether
bench=${bin:-build/experiments}/tether-bench-gpu
cuda_test=${bin:-build/tests}/test_cuda_backend
status=0
step() {  # step NAME SECONDS COMMAND...: runs it, logs it, records a failure
    local name=$1 seconds=$2
    shift 2
    echo "== $name: $*"
    local t0=$SECONDS
    timeout "$seconds" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "   exit $rc after $((SECONDS - t0)) s"
    [ $rc -eq 0 ] || status=1
    return 0
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
step cuda_backend 120 "$cuda_test"
tail -3 "$out/cuda_backend.log"
if command -v compute-sanitizer >/dev/null; then
    # Without the pin_host case, which has cudaHostRegister refuse a range on purpose: the
    # sanitizer counts every refused API call as an error.
    step cuda_backend_memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 1 "$cuda_test" '--test-case-exclude=pin_host*'
    step cuda_backend_racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 1 "$cuda_test" '--test-case=sum_of_squares*'
    tail -1 "$out/cuda_backend_racecheck.log"
    tail -3 "$out/cuda_backend_memcheck.log"
fi
for run in "sequential configs/sequential.json" "adag configs/adag.json" "averaging configs/averaging.json" \
           "adag_processes configs/adag.json --set cluster.mode=local"; do
    set -- $run
    name=$1
    shift
    step "run_$name" 120 "$tether" run "$@" --set training.device=cuda --out "$out/run_$name"
    grep -E "cuda|samples/s|accuracy" "$out/run_$name.log" | tail -4
done
PYTHONUNBUFFERED=1 step bench_gpu 500 python3 experiments/bench/bench_gpu.py --tether-bench-gpu "$bench" --cnn \
    --json "$out/bench_gpu.json"
cat "$out/bench_gpu.log"
exit $status
