// How a real number is fitted into a narrower floating-point format: the rounding direction and
// what happens at the two ends of the range. Every conversion in halfgrad (scalar or vector)
// takes these options; the default is IEEE 754 round-to-nearest-even with gradual underflow.
#pragma once

#include <cstdint>

namespace hg::precision {

enum class Rounding : uint8_t {
  kNearestEven,  // IEEE 754 default: nearest, ties to an even last bit
  kTowardZero,   // truncate the magnitude
  kUp,           // toward +inf
  kDown,         // toward -inf
  kStochastic,   // away from zero with probability equal to the discarded fraction
};

struct RoundingOptions {
  Rounding mode = Rounding::kNearestEven;
  // Finite values beyond the format's range become +-max instead of inf (e4m3, which has no
  // inf: instead of NaN). An inf input stays inf where the format has inf.
  bool saturate = false;
  // Results that would be subnormal become a zero of the same sign, like GPU/CPU FTZ modes.
  // Decided after rounding: a value that rounds up to the smallest normal is kept.
  bool flush_subnormals = false;
  // kStochastic only: uniform random bits from the caller, so results are reproducible. The
  // magnitude rounds away from zero iff frac32 + random_bits >= 2^32, where frac32 is the top 32
  // bits of the discarded fraction; P(away) = frac32 / 2^32, unbiased to 2^-32 of an ulp.
  uint32_t random_bits = 0;
};

}  // namespace hg::precision
