#!/usr/bin/env bash
# Installs what tether needs from Debian's packages, and only what is missing.
# Idempotent: a second run installs nothing and touches no package lists.
#   scripts/install-deps.sh           build + run dependencies (the Python package's too)
#   scripts/install-deps.sh --tests   also what only the tests need (PyTorch, for the Python binding's tests;
#                                     meson-python, venv and pip, for the test that pip-installs the package;
#                                     bible-kjv, the language model's corpus)
#   scripts/install-deps.sh --peers   also the comparison peers for benchmarks: Debian's PyTorch, and a venv
#                                     of PyTorch 2.x, torchft and tether from the Python package index
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
if [[ "${1:-}" == "--peers" ]]; then
  packages+=(python3-venv python3-pip)  # the peers' venv, below
  packages+=(bible-kjv)  # the language model's corpus, which the testbed's LM cells run from that venv
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
else
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run this script as root (or install them with apt-get)" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# --peers: the peers tether is compared with, from the Python package index, in a venv of their
# own (TETHER_PEERS_VENV, default ~/venvs/tether-peers; several GB): PyTorch 2.x and torchft,
# and tether itself built there with build isolation (the index's pybind11 reads NumPy 2).
if [[ "${1:-}" == "--peers" ]]; then
  venv="${TETHER_PEERS_VENV:-$HOME/venvs/tether-peers}"
  [[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv"
  if ! "$venv/bin/python" -c "import torch, torchft" 2>/dev/null; then
    echo "install-deps: installing torch and torchft into $venv"
    "$venv/bin/pip" install --quiet torch torchft numpy
  fi
  echo "install-deps: building tether into $venv"
  "$venv/bin/pip" install --quiet "$(cd "$(dirname "$0")/.." && pwd)"
  "$venv/bin/python" -c "import torch, torchft, tether, importlib.metadata as m; print('install-deps: peers venv', \
    '$venv', 'torch', torch.__version__, 'torchft', m.version('torchft'), 'tether', tether.__version__)"
fi
