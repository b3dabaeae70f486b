#!/usr/bin/env bash
# Build, then run every test (unit and exhaustive, the committed fuzz corpora, the clang compile
# check) under ctest; then the unit tests again in a second tree built with AddressSanitizer +
# UndefinedBehaviorSanitizer (build-asan/, any report fails the test). The fuzz targets' own
# libFuzzer runs (scripts/fuzz.sh) are not part of it: the tests replay the corpora those runs
# grew (tests/fuzz_corpus.h), under the sanitizers too, which reaches more of each
# reader than the clang tree's fixed-seed run of 10,000 inputs per target did, without building
# that tree (BENCHMARKS.md, "Test command").
# Arguments go to the first ctest. Prints each stage's wall time and CPU time (user + system of
# all it ran): CPU near twice the wall time on two cores means the stage kept both busy, and
# only less work shortens it.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
# CPU seconds of this shell and the children it has waited for (/proc/<pid>/stat fields 14-17,
# utime stime cutime cstime, in clock ticks); $$ is this shell's PID in a $(...) subshell too.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{printf "%d", ($14 + $15 + $16 + $17) / hz}' "/proc/$$/stat"; }
# A stage's line: its wall and CPU time since the previous stage's line (the first: since the start).
stage_wall=0 stage_cpu=0
stage_done() {
  local cpu
  cpu=$(cpu_seconds)
  echo "== $1: $((SECONDS - stage_wall)) s, CPU $((cpu - stage_cpu)) s"
  stage_wall=$SECONDS stage_cpu=$cpu
}
# clang for build.clang_syntax, clang-format-14 for repository.formatted.
export HALFGRAD_EXTRA_PACKAGES="clang clang-format-14"
source scripts/deps.sh  # the packages, and CMAKE_GENERATOR for the two trees
# The tests' OpenMP threads sleep at a barrier instead of spinning: ctest runs two test processes
# on two cores, and a thread spinning in one takes the core the other needs (CPU time of the
# Release tests 213 -> 204 s, of the sanitized ones 195-199 -> 188-191 s; BENCHMARKS.md).
export OMP_WAIT_POLICY=passive
# No test runs the benchmarks (scripts/main.sh builds them); the test files and the library
# compile as unity builds (CMakeLists.txt says why; the Highway kernel files compile alone).
bash scripts/build.sh -DHALFGRAD_BENCHMARKS=OFF -DHALFGRAD_UNITY_TESTS=ON -DHALFGRAD_UNITY_LIBRARY=ON
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
stage_done "release build and tests"

# Catch2's runner, compiled the same way in both trees (tests/CMakeLists.txt), is taken from the first.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DHALFGRAD_SANITIZE=ON \
  -DHALFGRAD_CATCH_MAIN_OBJECT="$PWD/build/tests/CMakeFiles/halfgrad_catch_main.dir/main.cpp.o" >/dev/null
cmake --build build-asan -j "$(nproc)" --target test_programs  # the test binary and the programs it runs
stage_done "sanitized (ASan+UBSan) build"

UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j "$(nproc)" \
  -LE "exhaustive|soak|tools|example" || { echo "== FAILED (above: the sanitized tests)"; exit 1; }
stage_done "sanitized unit tests"
echo "== all stages passed: ${SECONDS} s, CPU $(cpu_seconds) s"
