#!/usr/bin/env bash
# Syntax-checks the two unity builds each as one translation unit, in about a minute: the test
# files (tests/CMakeLists.txt, HALFGRAD_UNITY_TESTS) and the library's files (CMakeLists.txt,
# HALFGRAD_UNITY_LIBRARY, on in the trees of scripts/test.sh). A name at file scope that clashes with
# another file's shows here, before the test command's build finds it. Prints the compiler's
# errors; exit code non-zero when there are any. Needs the Debian packages scripts/deps.sh
# installs and a configured build/ (for its include directory).
set -euo pipefail
cd "$(dirname "$0")/.."
tests_unit=$(mktemp --suffix=.cpp)
library_unit=$(mktemp --suffix=.cpp)
trap 'rm -f "$tests_unit" "$library_unit"' EXIT
{
  echo '#include <catch2/catch.hpp>'
  echo '#include <nlohmann/json.hpp>'
  # The files the unity build leaves out: Catch2's runner, test_convert.cpp (own flags), tests/mpi/.
  find tests -name '*.cpp' ! -path 'tests/mpi/*' ! -name main.cpp ! -name test_convert.cpp | LC_ALL=C sort |
    while read -r f; do echo "#include \"$PWD/$f\""; done
} >"$tests_unit"
# The library's files but those that compile alone: the Highway kernel files (they include
# themselves once per target through HWY_TARGET_INCLUDE) and the MPI communicator.
find halfgrad -name '*.cpp' ! -name mpi_communicator.cpp | LC_ALL=C sort | xargs grep -L HWY_TARGET_INCLUDE |
  while read -r f; do echo "#include \"$PWD/$f\""; done >"$library_unit"
flags=(-fsyntax-only -std=gnu++20 -fopenmp -I"$PWD" -Ibuild/include -Ibuild/generated
       $(pkg-config --cflags sentencepiece) -Wall -Wextra -Wno-psabi -Wno-missing-field-initializers)
status=0
g++ "${flags[@]}" "$library_unit" || status=1
g++ "${flags[@]}" -DHALFGRAD_BIN_DIR='"x"' -DHALFGRAD_SOURCE_DIR="\"$PWD\"" -DHALFGRAD_SANITIZED_TREE "$tests_unit" ||
  status=1
exit $status
