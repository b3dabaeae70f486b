#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) into build-fuzz/ and runs each
# for FUZZ_SECONDS (default 20), one per core at a time, from its committed seed corpus
# fuzz/corpus/<name>/. Inputs the fuzzer finds go to build-fuzz/corpus/<name>/ (not the source
# tree); a crash, leak, timeout or sanitizer report fails the script and leaves the input as
# build-fuzz/crash-* (etc.), to be turned into a Catch2 test. Usage: scripts/fuzz.sh [target...]
# (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DHALFGRAD_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for dir in fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
# One fuzzer per core at a time; each writes its own log.
fuzz_one() {
  local name=$1 log="build-fuzz/fuzz_$1.log"
  mkdir -p "build-fuzz/corpus/$name"
  if ! build-fuzz/bin/"fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix=build-fuzz/ "build-fuzz/corpus/$name" "fuzz/corpus/$name" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz_$name: FAILED (input saved under build-fuzz/, full log $log)"
    return 1
  fi
  echo "fuzz_$name: $(grep -E '^#[0-9]+.*(DONE|pulse)' "$log" | tail -n 1)"
}
failed=0
jobs_at_once=$(nproc)
for ((i = 0; i < ${#targets[@]}; i += jobs_at_once)); do
  pids=()
  for name in "${targets[@]:i:jobs_at_once}"; do
    fuzz_one "$name" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
done
exit $failed
