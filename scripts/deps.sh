#!/usr/bin/env bash
# Installs the Debian 12 packages halfgrad builds with, only those that are missing.
# Sourced by scripts/build.sh, scripts/test.sh and scripts/fuzz.sh; uses sudo when not run as root.
set -euo pipefail
HALFGRAD_PACKAGES=(g++ cmake make ninja-build libhwy-dev catch2 libcli11-dev nlohmann-json3-dev libopenblas-dev
  # SHA-256 checksums of checkpoint files (halfgrad/io/digest.h).
  libssl-dev
  # MPI: data-parallel training across processes (docs/distributed.md) and its tests.
  libopenmpi-dev openmpi-bin
  # SentencePiece: the sentencepiece tokenizer (halfgrad/data/sentencepiece.h).
  libsentencepiece-dev
  # Debian's word lists: the language-id data set of the main job (halfgrad/data/dataset.h).
  wamerican wngerman wfrench wspanish witalian wportuguese wdutch
  # Debian's fortune files: the topic set of bench/tasks.py (tools/make_topics.py).
  fortunes)
# Optional test tools, not installed here (their tests are skipped without them): python3-torch
# (tools/to_torch.py's round trip) and chromium (the HTML report loaded in a browser,
# tests/report/report_in_chromium.sh): `apt-get install python3-torch chromium`.
# Callers may ask for more (scripts/test.sh: clang for the fuzz targets).
read -r -a extra <<< "${HALFGRAD_EXTRA_PACKAGES:-}"
HALFGRAD_PACKAGES+=("${extra[@]}")
# One dpkg-query for all of them (one per package took 0.7-0.9 s, and a test command sources this
# file four times); a package it does not know is missing too.
declare -A installed=()
while read -r name status; do
  [ "$status" = "install ok installed" ] && installed[$name]=1
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${HALFGRAD_PACKAGES[@]}" 2>/dev/null || true)
missing=()
for p in "${HALFGRAD_PACKAGES[@]}"; do
  [ -n "${installed[$p]:-}" ] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "halfgrad: installing missing packages: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# New build trees use Ninja (a tree keeps the generator it was made with; a user's
# CMAKE_GENERATOR wins): Make builds a target's objects only after the targets it links are
# linked, so each library's last file compiled alone; the Release tree took 268 s with Make
# and 247 s with Ninja (BENCHMARKS.md, "Test command").
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"
