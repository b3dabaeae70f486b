#!/usr/bin/env bash
# The main job: build, then train the language-id classifier (fp16 O2); extra flags go to `halfgrad train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DHALFGRAD_BENCHMARKS=ON
exec build/bin/halfgrad train "$@"
