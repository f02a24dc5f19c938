#!/usr/bin/env bash
# Configures (once) and builds tether into ./build: everything, or with `--only TARGET` first
# that target alone (run-main.sh builds the `tether` command without the test suite). nvcc is picked up from PATH or from
# /usr/local/cuda/bin; without it the CPU-only build is made (meson option cuda=auto). The
# Python package alone, for another interpreter: pip install --no-build-isolation . (docs/python.md).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
if [[ "${1:-}" == --only ]]; then
  targets=("${2:?--only needs a target, e.g. tether}")
  shift 2
fi
if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [[ ! -f build/build.ninja ]]; then
  # The Python package for Debian's python3 (numpy, torch), not a pyenv or venv python3 on PATH;
  # a later -Dpython_interpreter=... among the arguments wins.
  meson setup build -Dpython_interpreter=/usr/bin/python3 "$@"
elif (( $# > 0 )); then
  meson configure build "$@"
fi
ninja -C build "${targets[@]}"
