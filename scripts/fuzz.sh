#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) into build-fuzz/ and runs each
# for FUZZ_SECONDS (default 20) from its committed seed corpus fuzz/corpus/<name>/. Inputs the
# fuzzer finds go to build-fuzz/corpus/<name>/ (not the source tree); a crash, leak, timeout or
# sanitizer report stops with a non-zero exit and leaves the input as build-fuzz/crash-* (etc.),
# to be turned into a Catch2 test. Usage: scripts/fuzz.sh [target...] (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DHALFGRAD_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for dir in fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
for name in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$name"
  log="build-fuzz/fuzz_$name.log"
  if ! build-fuzz/bin/"fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix=build-fuzz/ "build-fuzz/corpus/$name" "fuzz/corpus/$name" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz_$name: FAILED (input saved under build-fuzz/, full log $log)"
    exit 1
  fi
  echo "fuzz_$name: $(grep -E '^#[0-9]+.*(DONE|pulse)' "$log" | tail -n 1)"
done
