#!/usr/bin/env bash
# Build, then run every test (unit and exhaustive) under ctest; then the unit tests again in a
# second tree built with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, any report
# fails the test) and, when clang++ is installed, the reproducible libFuzzer run of every fuzz
# target (scripts/fuzz.sh, its own clang tree build-fuzz/). The stages run one after the other:
# with Ninja no stage leaves a core idle for long, and the fuzz stage beside the sanitized one
# made the two take 634 s where one after the other they took 518 s (BENCHMARKS.md, "Test
# command"). Arguments go to the first ctest. Prints the time of each stage.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
# clang for the fuzz targets (scripts/fuzz.sh), clang-format-14 for repository.formatted.
export HALFGRAD_EXTRA_PACKAGES="clang libclang-rt-14-dev clang-format-14"
source scripts/deps.sh  # the packages, and CMAKE_GENERATOR for the three trees
# No test runs the benchmarks (scripts/main.sh builds them); the test files and the library
# compile as unity builds (CMakeLists.txt says why; the Highway kernel files compile alone).
bash scripts/build.sh -DHALFGRAD_BENCHMARKS=OFF -DHALFGRAD_UNITY_TESTS=ON -DHALFGRAD_UNITY_LIBRARY=ON
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
echo "== release build and tests: ${SECONDS} s"

start=$SECONDS
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DHALFGRAD_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$(nproc)" --target test_programs  # the test binary and the programs it runs
UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE "exhaustive|soak|tools|example"
echo "== sanitized (ASan+UBSan) build and unit tests: $((SECONDS - start)) s"

start=$SECONDS
if command -v clang++ >/dev/null; then
  bash scripts/fuzz.sh
  echo "== fuzzing: $((SECONDS - start)) s"
else
  echo "== clang++ not found: fuzzing skipped"
fi
echo "== all stages passed: ${SECONDS} s"
