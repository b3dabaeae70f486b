#!/usr/bin/env bash
# The main job: build, then run the default halfgrad program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/bin/underflow "$@"
