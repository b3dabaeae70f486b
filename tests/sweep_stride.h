// How much of a large numeric sweep a test runs. The Release tree runs every value; the sanitized
// tree (HALFGRAD_SANITIZED_TREE: ASan + UBSan, scripts/test.sh) keeps every kSweepStride-th one.
// There the tests look for memory and undefined-behaviour errors, which depend on span lengths,
// tails, targets and code paths, not on how many values go through them; the full sweeps under
// ASan took minutes of the test command's 15 (test_convert.cpp's alone 92 s).
#pragma once

#include <cstddef>

namespace hg::testing {

#ifdef HALFGRAD_SANITIZED_TREE
inline constexpr size_t kSweepStride = 8;
#else
inline constexpr size_t kSweepStride = 1;
#endif

}  // namespace hg::testing
