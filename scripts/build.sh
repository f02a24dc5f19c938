#!/usr/bin/env bash
# Configures (once) and builds tether into ./build. nvcc is picked up from PATH or from
# /usr/local/cuda/bin; without it the CPU-only build is made (meson option cuda=auto). The
# Python package alone, for another interpreter: pip install --no-build-isolation . (docs/python.md).
set -euo pipefail
cd "$(dirname "$0")/.."
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
ninja -C build
