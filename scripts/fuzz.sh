#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) into build-fuzz/ and runs each,
# one per core at a time. The test command does not run them: it replays the committed corpora
# fuzz/corpus/<name>/ through the same targets (tests/fuzz_corpus.h), so grow those here.
#
#   scripts/fuzz.sh [target...]                   a short reproducible run
#   scripts/fuzz.sh --explore SECONDS [target...]  a longer exploratory run
#   scripts/fuzz.sh --merge [target...]            add what --explore found to fuzz/corpus/
#   scripts/fuzz.sh --build-only [target...]       configure and build, run nothing
#
# The short run is the same on every machine: a fixed seed (-seed=1) and a fixed number of
# inputs per target (FUZZ_RUNS, default 10000), starting from the committed corpus alone (new
# inputs go to a fresh build-fuzz/run/<name>/). --explore runs each target for SECONDS with a
# random seed and keeps what it finds in build-fuzz/corpus/<name>/ across runs; --merge then
# copies into fuzz/corpus/<name>/ only those of its inputs that reach code (coverage features)
# the committed corpus does not (libFuzzer's -merge=1), for a commit. Either run fails on a
# crash, leak, timeout or sanitizer report and leaves the input as build-fuzz/crash-* (etc.):
# add it to fuzz/corpus/<name>/ and, if it needs explaining, a test to
# tests/io/test_fuzz_findings.cpp.
set -euo pipefail
cd "$(dirname "$0")/.."
explore="" build_only="" merge=""
if [ "${1:-}" = "--explore" ]; then
  explore=${2:?"--explore needs a number of seconds"}
  shift 2
elif [ "${1:-}" = "--merge" ]; then
  merge=1
  shift
elif [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
runs="${FUZZ_RUNS:-10000}"
export HALFGRAD_EXTRA_PACKAGES="clang libclang-rt-14-dev"  # clang++ and its libFuzzer
source scripts/deps.sh  # the libraries, and the generator of new trees
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DHALFGRAD_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for dir in fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
[ -z "$build_only" ] || exit 0
if [ -n "$merge" ]; then
  for name in "${targets[@]}"; do
    [ -d "build-fuzz/corpus/$name" ] || continue  # nothing explored
    before=$(ls "fuzz/corpus/$name" | wc -l)
    build-fuzz/bin/"fuzz_$name" -merge=1 -rss_limit_mb=2048 "fuzz/corpus/$name" "build-fuzz/corpus/$name" \
      >"build-fuzz/merge_$name.log" 2>&1 || { tail -n 20 "build-fuzz/merge_$name.log"; exit 1; }
    echo "fuzz/corpus/$name: $before -> $(ls "fuzz/corpus/$name" | wc -l) inputs"
  done
  exit 0
fi

fuzz_one() {
  local name=$1 log="build-fuzz/fuzz_$1.log" corpus limits
  if [ -n "$explore" ]; then
    corpus="build-fuzz/corpus/$name"
    limits=(-max_total_time="$explore")
  else
    corpus="build-fuzz/run/$name"
    rm -rf "$corpus"
    limits=(-seed=1 -runs="$runs")
  fi
  mkdir -p "$corpus"
  if ! build-fuzz/bin/"fuzz_$name" "${limits[@]}" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix=build-fuzz/ "$corpus" "fuzz/corpus/$name" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz_$name: FAILED (input saved under build-fuzz/, full log $log)"
    return 1
  fi
  echo "fuzz_$name: $(grep -E '^#[0-9]+.*(DONE|pulse)' "$log" | tail -n 1)"
}
# One target per core; a core that finishes takes the next target (cli_parser takes about five
# times as long as the others).
failed=0 running=0
for name in "${targets[@]}"; do
  if ((running >= $(nproc))); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$name" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
exit $failed
