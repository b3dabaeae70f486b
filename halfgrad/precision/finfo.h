// finfo<T>: the numbers that describe a floating-point type, as torch.finfo names them, for
// float, double and every SmallFloat (half, bfloat16, fp8). All values are exact doubles.
#pragma once

#include <limits>

#include "halfgrad/precision/small_float.h"

namespace hg::precision {

struct FloatInfo {
  const char* name;
  int bits;           // storage width
  int mantissa_bits;  // stored fraction bits (the significand has one more)
  int exponent_bits;
  double eps;                 // 2^-mantissa_bits: the gap between 1 and the next value
  double max;                 // largest finite value
  double smallest_normal;     // torch.finfo.tiny
  double smallest_subnormal;  // the smallest positive value
};

template <class T>
constexpr FloatInfo finfo() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, float>) {
    return {"f32", 32, 23, 8, L::epsilon(), L::max(), L::min(), L::denorm_min()};
  } else if constexpr (std::is_same_v<T, double>) {
    return {"f64", 64, 52, 11, L::epsilon(), L::max(), L::min(), L::denorm_min()};
  } else {
    constexpr FloatFormat F = T::kFormat;
    return {format_name(F),           F.storage_bits(),     F.mantissa_bits,      F.exponent_bits,
            L::epsilon().to_double(), L::max().to_double(), L::min().to_double(), L::denorm_min().to_double()};
  }
}

}  // namespace hg::precision

namespace hg {
using precision::finfo;
using precision::FloatInfo;
}  // namespace hg
