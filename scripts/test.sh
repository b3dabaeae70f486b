#!/usr/bin/env bash
# Build, then run every test (unit and exhaustive) under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
