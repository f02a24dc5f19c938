#!/usr/bin/env bash
# Quick start 2: install what is missing, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
scripts/build.sh
status=0
meson test -C build --print-errorlogs "$@" | tee build/meson-test.out || status=$?
# One plain closing line, whatever the runner prints: N passed, N failed, N skipped.
awk '/^Ok:/{ok=$2} /^Fail:/{f+=$2} /^Timeout:/{f+=$2} /^Unexpected Pass:/{f+=$3} /^Skipped:/{s=$2}
     END{printf "%d passed, %d failed, %d skipped\n", ok, f, s}' build/meson-test.out
exit "$status"
