#!/usr/bin/env bash
# The consumer test (ctest `example.consumer`, label consumer): builds examples/consumer/ the two
# ways a user's project takes halfgrad, and runs its test each time.
#   1. `cmake --install` of halfgrad's build tree into WORK/prefix (the `dev` component: libraries,
#      headers, CMake and pkg-config files), then find_package(halfgrad 0.3 REQUIRED COMPONENTS
#      numerics) from that prefix; the pkg-config file must name the same prefix.
#   2. FetchContent from the checkout (FETCHCONTENT_SOURCE_DIR_HALFGRAD): halfgrad must register
#      no ctest entry and define none of its programs or tests, and the build must compile
#      halfgrad's numerics library and nothing else of halfgrad.
# Usage: check.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
jobs=$(nproc)
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
fail() { echo "consumer: FAILED: $*"; exit 1; }

rm -rf "$work/prefix" "$work/installed" "$work/fetched"
cmake --install "$build" --prefix "$work/prefix" --component dev >/dev/null
pc_prefix=$(PKG_CONFIG_PATH=$(dirname "$(find "$work/prefix" -name halfgrad.pc)") \
            pkg-config --variable=includedir halfgrad)
[ "$(realpath "$pc_prefix")" = "$(realpath "$work/prefix/include")" ] ||
  fail "halfgrad.pc names includedir $pc_prefix, not $work/prefix/include"
# No build type, so no optimisation: the builds check the package, not the code's speed (at -O3
# the consumer's Catch2 main and the fetched numerics took this test to 58 s).
cmake -S "$src/examples/consumer" -B "$work/installed" -DCMAKE_BUILD_TYPE= \
  -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >/dev/null
cmake --build "$work/installed" -j "$jobs" >/dev/null
ctest --test-dir "$work/installed" --output-on-failure
echo "consumer: find_package build passed"

cmake -S "$src/examples/consumer" -B "$work/fetched" -DCMAKE_BUILD_TYPE= -DCONSUMER_FETCH_HALFGRAD=ON \
  -DFETCHCONTENT_SOURCE_DIR_HALFGRAD="$src" "${launcher[@]}" >/dev/null
targets=$(cmake --build "$work/fetched" --target help)
for unwanted in halfgrad_cli halfgrad_tests underflow bench_gemm example_quickstart; do
  ! grep -qw "$unwanted" <<<"$targets" || fail "FetchContent defined halfgrad's target $unwanted"
done
cmake --build "$work/fetched" -j "$jobs" >"$work/fetched/build.log"
# Every object compiled from halfgrad's tree belongs to the numerics library.
others=$(grep -oE 'Building CXX object _deps/[^ ]+' "$work/fetched/build.log" | grep -v 'halfgrad_numerics\.dir' || true)
[ -z "$others" ] || fail "FetchContent compiled more than the numerics: $others"
[ -n "$(find "$work/fetched/_deps" -name 'libhalfgrad_numerics.a')" ] || fail "the numerics library was not built"
entries=$(ctest --test-dir "$work/fetched" -N | grep -cE '^ *Test +#' || true)
[ "$entries" -eq 1 ] || fail "$entries ctest entries under FetchContent, expected the consumer's one"
ctest --test-dir "$work/fetched" --output-on-failure
echo "consumer: FetchContent build passed"
