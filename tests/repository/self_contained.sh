#!/usr/bin/env bash
# The repository stands alone: no tracked file names a path outside it (a sibling folder such as
# ../shared, or an absolute path of a development machine: /work/, /home/, /root/, /Users/) or
# cites the development notes (refs/roundN.md) instead of a primary source.
# Usage: self_contained.sh SOURCE_DIR. Exit 77 (skipped) outside a git checkout (a source tarball).
set -uo pipefail
src=$1
git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout: skipped"; exit 77; }
# This file spells the patterns, so it is the one file left out.
hits=$(git -C "$src" grep -n -I -E '\.\./shared|refs/round|round[0-9]+\.md|(^|[^A-Za-z0-9_.~-])/(work|home|root|Users)/' \
  -- ':!tests/repository/self_contained.sh')
if [ -n "$hits" ]; then
  echo "tracked files name paths outside the repository (cite the primary source instead):"
  echo "$hits"
  exit 1
fi
echo "no tracked file names a path outside the repository"
