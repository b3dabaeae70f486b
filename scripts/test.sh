#!/usr/bin/env bash
# Build, then run every test (unit and exhaustive) under ctest; then the unit tests again in a
# second tree built with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, any report
# fails the test), and, when clang++ is installed, a bounded libFuzzer run of every fuzz target
# (scripts/fuzz.sh). Arguments go to the first ctest. Prints the time of each part.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
export HALFGRAD_EXTRA_PACKAGES="clang libclang-rt-14-dev"  # the fuzz targets (scripts/fuzz.sh)
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
echo "== release build and tests: ${SECONDS} s"

start=$SECONDS
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DHALFGRAD_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$(nproc)" --target halfgrad_tests  # the test binary and the programs it runs
UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE "exhaustive|soak"
echo "== sanitized (ASan+UBSan) build and unit tests: $((SECONDS - start)) s"

if command -v clang++ >/dev/null; then
  start=$SECONDS
  bash scripts/fuzz.sh
  echo "== fuzzing: $((SECONDS - start)) s"
else
  echo "== clang++ not found: fuzzing skipped"
fi
