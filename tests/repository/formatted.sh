#!/usr/bin/env bash
# Every tracked C++ file is as clang-format 14 (Debian 12's) formats it with the repository's
# .clang-format. Other versions format differently, so without clang-format-14 the check is
# skipped (exit 77), as it is outside a git checkout (a source tarball).
# Usage: formatted.sh SOURCE_DIR. Fix: git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i
set -uo pipefail
src=$1
git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout: skipped"; exit 77; }
command -v clang-format-14 >/dev/null || { echo "clang-format-14 not installed (apt-get install clang-format-14): skipped"; exit 77; }
cd "$src" || exit 1
bad=$(git ls-files -z '*.cpp' '*.h' | xargs -0 clang-format-14 --dry-run 2>&1 | grep -o '^[^:]*:[0-9]*:[0-9]*: warning' | cut -d: -f1 | sort -u)
if [ -n "$bad" ]; then
  echo "not formatted (git ls-files '*.cpp' '*.h' | xargs clang-format-14 -i):"
  echo "$bad"
  exit 1
fi
echo "every tracked C++ file is formatted"
