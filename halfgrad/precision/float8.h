// The two OCP 8-bit formats (OCP "8-bit Floating Point Specification" v1.0, 2023):
// float8_e4m3: 4 exponent, 3 mantissa bits, bias 7, no inf, one NaN per sign (S.1111.111),
//   max 448; overflow gives NaN, or +-448 with RoundingOptions::saturate.
// float8_e5m2: 5 exponent, 2 mantissa bits, bias 15, IEEE-like with inf and NaN, max 57344.
#pragma once

#include "halfgrad/precision/small_float.h"

namespace hg {
using float8_e4m3 = precision::SmallFloat<precision::kE4M3>;
using float8_e5m2 = precision::SmallFloat<precision::kE5M2>;
}  // namespace hg
