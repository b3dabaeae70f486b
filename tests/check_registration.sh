#!/usr/bin/env bash
# Checks that ctest runs every Catch2 test case exactly once (tests/CMakeLists.txt registers it as
# the ctest test `test_registration`). Usage: check_registration.sh TEST_BINARY BUILD_DIR LABEL=SPEC...
# For each LABEL=SPEC: the Catch2 test cases SPEC selects must number as many as the ctest entries
# labelled LABEL, and no test name may contain ';'. A SPEC written files:SPEC is registered one entry
# per test file (tests/cmake/discover_files.cmake): the entries must number as many as the files
# whose cases SPEC selects, and those files' cases must add up to SPEC's. Exit 1 with the
# difference otherwise.
set -euo pipefail
binary=$1 build=$2
shift 2
status=0
for pair in "$@"; do
  label=${pair%%=*} spec=${pair#*=} per_file="" counted="Catch2 test cases"
  if [[ $spec == files:* ]]; then per_file=1 spec=${spec#files:}; fi
  # --list-test-names-only exits with the number of tests listed, so its status is not an error.
  names=$("$binary" --list-test-names-only "$spec" || true)
  if grep -q ';' <<<"$names"; then
    echo "label $label: test names containing ';' (CMake splits them into entries that run nothing):"
    grep ';' <<<"$names"
    status=1
  fi
  cases=$(grep -c . <<<"$names" || true)
  entries=$(ctest --test-dir "$build" -N -L "^${label}\$" | grep -cE '^ *Test +#' || true)
  if [ -n "$per_file" ]; then
    # Catch2's tag list under -#: "  <cases>  [#<file>]" per file.
    files=$("$binary" -# --list-tags "$spec" | grep -E '^ *[0-9]+ +\[#' || true)
    in_files=$(awk '{n += $1} END {print n + 0}' <<<"$files")
    if [ "$in_files" -ne "$cases" ]; then
      echo "label $label: the test files' cases add up to $in_files, the spec '$spec' selects $cases"
      status=1
    fi
    cases=$(grep -c . <<<"$files" || true) counted="test files"
  fi
  if [ "$cases" -ne "$entries" ]; then
    echo "label $label: $cases $counted for spec '$spec' but $entries ctest entries"
    status=1
  else
    echo "label $label: $cases $counted, $entries ctest entries"
  fi
done
exit $status
