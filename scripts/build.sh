#!/usr/bin/env bash
# Installs missing packages, then configures and builds halfgrad (Release, -O3) into build/.
# Arguments go to the configure step (scripts/main.sh: -DHALFGRAD_BENCHMARKS=ON; scripts/test.sh:
# OFF, -DHALFGRAD_UNITY_TESTS=ON and -DHALFGRAD_UNITY_LIBRARY=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)"
