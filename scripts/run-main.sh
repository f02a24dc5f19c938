#!/usr/bin/env bash
# Quick start 1: install what is missing, build, and train the default job: the MLP
# 784-256-128-10 with Adam on Fashion-MNIST, 10 epochs (configs/sequential.json).
# Extra arguments go to `tether run`, e.g. --set training.epochs=3
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --only tether  # the command alone; scripts/test.sh builds the rest
exec build/tether run configs/sequential.json "$@"
