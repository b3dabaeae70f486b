#!/usr/bin/env bash
# The Debian packages (cmake/install.cmake, CPack DEB; ctest `package.deb`, label package): runs
# cpack on the build tree and checks each package's files (dpkg-deb -c) and declared
# dependencies (dpkg-deb -f). Installs nothing. Exit 77 (skipped) without dpkg-deb.
# Usage: check_packages.sh BUILD_DIR WORK_DIR VERSION
set -euo pipefail
build=$1 work=$2 version=$3
command -v dpkg-deb >/dev/null || { echo "dpkg-deb not found: the package test is skipped"; exit 77; }
fail() { echo "package: FAILED: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
cpack --config "$build/CPackConfig.cmake" -B "$work" >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack"; }
dev=$(ls "$work"/libhalfgrad-dev_"$version"_*.deb) || fail "no libhalfgrad-dev_$version package"
programs=$(ls "$work"/halfgrad_"$version"_*.deb) || fail "no halfgrad_$version package"

dev_files=$(dpkg-deb -c "$dev" | awk '{print $NF}')
for want in ./usr/include/halfgrad/precision/half.h ./usr/include/halfgrad/precision/catch_matchers.h \
            ./usr/include/halfgrad/version.h ./usr/include/halfgrad/autograd/tensor.h \
            ./usr/lib/libhalfgrad.a ./usr/lib/libhalfgrad_numerics.a \
            ./usr/lib/cmake/halfgrad/halfgradConfig.cmake ./usr/lib/cmake/halfgrad/halfgradConfigVersion.cmake \
            ./usr/lib/cmake/halfgrad/halfgrad-numerics-targets.cmake ./usr/lib/pkgconfig/halfgrad.pc; do
  grep -qxF "$want" <<<"$dev_files" || fail "libhalfgrad-dev lacks $want"
done
! grep -q '^\./usr/bin/' <<<"$dev_files" || fail "libhalfgrad-dev holds programs"
! grep -q '\.cpp$' <<<"$dev_files" || fail "libhalfgrad-dev holds sources"
program_files=$(dpkg-deb -c "$programs" | awk '{print $NF}')
grep -qxF ./usr/bin/halfgrad <<<"$program_files" || fail "halfgrad lacks /usr/bin/halfgrad"
! grep -q '^\./usr/include/' <<<"$program_files" || fail "halfgrad holds headers"

dev_depends=$(dpkg-deb -f "$dev" Depends)
for want in libhwy-dev nlohmann-json3-dev libssl-dev libsentencepiece-dev; do
  grep -qw "$want" <<<"$dev_depends" || fail "libhalfgrad-dev does not depend on $want ($dev_depends)"
done
program_depends=$(dpkg-deb -f "$programs" Depends)
grep -q 'libhwy1' <<<"$program_depends" || fail "halfgrad does not depend on libhwy1 ($program_depends)"
echo "package: $(basename "$dev") ($dev_depends), $(basename "$programs") ($program_depends): passed"
