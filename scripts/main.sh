#!/usr/bin/env bash
# The main job: build, then train the language-id classifier (fp16 O2); extra flags go to `halfgrad train`.
# --overwrite-output-dir: a second run replaces the first's halfgrad-output/ (halfgrad train alone
# refuses a folder holding an earlier run's checkpoints, as Hugging Face's example scripts do).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DHALFGRAD_BENCHMARKS=ON
exec build/bin/halfgrad train --overwrite-output-dir "$@"
