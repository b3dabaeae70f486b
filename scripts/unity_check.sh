#!/usr/bin/env bash
# Syntax-checks every test file of the unity build (tests/CMakeLists.txt, HALFGRAD_UNITY_TESTS) as
# one translation unit, in about 15 s: a name at file scope that clashes with another test file's
# shows here, before the test command's build finds it. Prints the compiler's errors; exit code
# non-zero when there are any. Needs the Debian packages scripts/deps.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
unit=$(mktemp --suffix=.cpp)
trap 'rm -f "$unit"' EXIT
{
  echo '#include <catch2/catch.hpp>'
  echo '#include <nlohmann/json.hpp>'
  # The files the unity build leaves out: Catch2's runner, test_convert.cpp (own flags), tests/mpi/.
  find tests -name '*.cpp' ! -path 'tests/mpi/*' ! -name main.cpp ! -name test_convert.cpp | LC_ALL=C sort |
    while read -r f; do echo "#include \"$PWD/$f\""; done
} >"$unit"
g++ -fsyntax-only -std=c++20 -fopenmp -I"$PWD" -DHALFGRAD_BIN_DIR='"x"' -DHALFGRAD_SOURCE_DIR="\"$PWD\"" \
  -DHALFGRAD_SANITIZED_TREE -Wall -Wextra -Wno-psabi -Wno-missing-field-initializers "$unit"
