#!/usr/bin/env bash
# tether.torch under the Python package index's PyTorch 2.x: rebuilds tether into the peers' venv
# from this tree (pip install ., build isolation) and runs the Python tests there, the torchft one
# included. The default test command (scripts/test.sh, meson test) runs the same tests under
# Debian's python3-torch 1.13; this one needs the venv scripts/install-deps.sh --peers makes
# (TETHER_PEERS_VENV, default ~/venvs/tether-peers; several GB), and exits 77 without it. It
# replaces the venv's tether: not while a testbed grid runs from that venv.
#   scripts/test-peers.sh [BUILD_DIR]   (BUILD_DIR: a configured build for the test plugin; default build)
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$source_dir/build}"
venv="${TETHER_PEERS_VENV:-$HOME/venvs/tether-peers}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch, torchft" 2>/dev/null; then
  echo "test-peers: no venv with torch and torchft at $venv; scripts/install-deps.sh --peers makes one" >&2
  exit 77
fi
plugin="$build/tests/libdamped_sum_plugin.so"
if [[ ! -f "$plugin" ]]; then
  echo "test-peers: $plugin is missing; build first (scripts/build.sh)" >&2
  exit 2
fi
echo "test-peers: building tether from $source_dir into $venv"
"$venv/bin/pip" install --quiet "$source_dir"
"$venv/bin/python" -c "import torch, torchft, numpy, tether, importlib.metadata as m; print('test-peers: torch', \
  torch.__version__, 'torchft', m.version('torchft'), 'numpy', numpy.__version__, 'tether', tether.__version__)"
failed=()
cd "$source_dir/tests/python"  # the tests import their harness from here, and tether from the venv
for t in binding_test launch_test torch_state_test language_model_test language_model_torchft_test; do
  echo "== $t"
  code=0
  env -u PYTHONPATH TETHER_SOURCE_DIR="$source_dir" TETHER_PLUGIN="$plugin" TETHER_PEERS_VENV="$venv" \
    "$venv/bin/python" "$t.py" || code=$?
  [[ $code == 0 || $code == 77 ]] || failed+=("$t")
done
if (( ${#failed[@]} )); then
  echo "test-peers: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test-peers: all passed"
