// half: IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits; max 65504, smallest normal
// 2^-14, smallest subnormal 2^-24). Conversions round to nearest even by default; see
// rounding.h for the other modes, saturation and flush-to-zero, small_float.h for arithmetic.
#pragma once

#include "halfgrad/precision/small_float.h"

namespace hg {
using half = precision::SmallFloat<precision::kBinary16>;
}  // namespace hg
