#!/usr/bin/env bash
# Configures (once) and builds tether into ./build. nvcc is picked up from PATH or from
# /usr/local/cuda/bin; without it the CPU-only build is made (meson option cuda=auto).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [[ ! -f build/build.ninja ]]; then
  meson setup build "$@"
elif (( $# > 0 )); then
  meson configure build "$@"
fi
ninja -C build
