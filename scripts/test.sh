#!/usr/bin/env bash
# The whole test suite: builds, then runs every unit, oracle, bad-input and end-to-end test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
