#!/usr/bin/env bash
# Checks that ctest runs every Catch2 test case exactly once (tests/CMakeLists.txt registers it as
# the ctest test `test_registration`). Usage: check_registration.sh TEST_BINARY BUILD_DIR LABEL=SPEC...
# For each LABEL=SPEC: the Catch2 test cases SPEC selects must number as many as the ctest entries
# labelled LABEL, and no test name may contain ';'. Exit 1 with the difference otherwise.
set -euo pipefail
binary=$1 build=$2
shift 2
status=0
for pair in "$@"; do
  label=${pair%%=*} spec=${pair#*=}
  # --list-test-names-only exits with the number of tests listed, so its status is not an error.
  names=$("$binary" --list-test-names-only "$spec" || true)
  if grep -q ';' <<<"$names"; then
    echo "label $label: test names containing ';' (CMake splits them into entries that run nothing):"
    grep ';' <<<"$names"
    status=1
  fi
  cases=$(grep -c . <<<"$names" || true)
  entries=$(ctest --test-dir "$build" -N -L "^${label}\$" | grep -cE '^ *Test +#' || true)
  if [ "$cases" -ne "$entries" ]; then
    echo "label $label: $cases Catch2 test cases for spec '$spec' but $entries ctest entries"
    status=1
  else
    echo "label $label: $cases Catch2 test cases, $entries ctest entries"
  fi
done
exit $status
