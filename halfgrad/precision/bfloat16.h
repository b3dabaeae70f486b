// bfloat16: the upper half of an f32 (1 sign, 8 exponent, 7 mantissa bits): f32's range with
// 8 bits of precision. Same interface and rounding options as half (small_float.h).
#pragma once

#include "halfgrad/precision/small_float.h"

namespace hg {
using bfloat16 = precision::SmallFloat<precision::kBFloat16>;
}  // namespace hg
