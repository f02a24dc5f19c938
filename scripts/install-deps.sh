#!/usr/bin/env bash
# Installs what tether needs from Debian's packages, and only what is missing.
# Idempotent: a second run installs nothing and touches no package lists.
#   scripts/install-deps.sh           build + run dependencies (the Python package's too)
#   scripts/install-deps.sh --tests   also what only the tests need (PyTorch, for the Python binding's tests;
#                                     meson-python, venv and pip, for the test that pip-installs the package;
#                                     bible-kjv, the language model's corpus)
#   scripts/install-deps.sh --peers   also the comparison peers (PyTorch) for benchmarks
# --tests and --peers add what experiments/testbed uses (iproute2: ip and tc; nftables: loss);
# its test in the suite skips where they or root are missing.
set -euo pipefail

packages=(
  build-essential pkg-config meson ninja-build
  libzmq3-dev cppzmq-dev libsodium-dev nlohmann-json3-dev libboost-program-options-dev doctest-dev
  libthrust-dev libopenblas-dev zlib1g-dev
  dataset-fashion-mnist python3 python3-matplotlib
  cmake  # tests/packaging builds a find_package(tether) consumer
  pybind11-dev python3-dev python3-numpy
)
if [[ "${1:-}" == "--peers" || "${1:-}" == "--tests" ]]; then
  packages+=(python3-torch iproute2 nftables)
fi
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(python3-mesonpy python3-venv python3-pip)  # tests/python/wheel_test.py
  packages+=(bible-kjv)  # the language model's corpus (examples/python/language_model.py)
  # The wheel test compiles the package a second time; with ccache (which Meson uses when it
  # finds it) that build reuses scripts/build.sh's objects instead of compiling them cold.
  packages+=(ccache)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if (( ${#missing[@]} == 0 )); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (or install them with apt-get)" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
