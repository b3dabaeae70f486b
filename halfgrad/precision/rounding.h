// How a real number is fitted into a narrower floating-point format: the rounding direction and
// what happens at the two ends of the range. Every rounding in halfgrad takes these options:
// conversions (scalar and vector), arithmetic (hg::add, hg::mul, ... in arithmetic.h) and the
// constructors of half, bfloat16 and fp8. The default is IEEE 754 round-to-nearest-even with
// gradual underflow. Also reachable as hg::Rounding and hg::RoundingOptions.
#pragma once

#include <cstdint>

namespace hg::precision {

enum class Rounding : uint8_t {
  kNearestEven,  // IEEE 754 default: nearest, ties to an even last bit
  kTowardZero,   // truncate the magnitude
  kUp,           // toward +inf
  kDown,         // toward -inf
  kStochastic,   // away from zero with probability equal to the discarded fraction
  kNearestAway,  // IEEE 754 roundTiesToAway: nearest, ties away from zero
};

struct RoundingOptions {
  Rounding mode = Rounding::kNearestEven;
  // Finite values beyond the format's range become +-max instead of inf (e4m3, which has no
  // inf: instead of NaN). An inf input stays inf where the format has inf, unless saturate_inf.
  bool saturate = false;
  // Results that would be subnormal become a zero of the same sign, like GPU/CPU FTZ modes.
  // Decided after rounding: a value that rounds up to the smallest normal is kept.
  bool flush_subnormals = false;
  // With saturate, an inf input (and an infinite result of arithmetic) becomes +-max as well:
  // the OCP FP8 spec's saturating conversion (OFP8 v1.0 5.2.1, Table 3: E5M2 sat maps +-Inf to
  // +-57344). Without it, saturate clamps finite values only and keeps inf: halfgrad's earlier
  // behaviour, and IEEE-style clamping. e4m3 has no inf: its inf inputs become +-max under
  // saturate either way. No effect without saturate.
  bool saturate_inf = false;
  // kStochastic only, and only for one value (a scalar conversion or operation): uniform random
  // bits from the caller, so results are reproducible. The magnitude rounds away from zero iff
  // frac32 + random_bits >= 2^32, where frac32 is the top 32 bits of the discarded fraction;
  // P(away) = frac32 / 2^32, unbiased to 2^-32 of an ulp. Span conversions (convert.h) draw
  // their bits from a seed instead and reject a nonzero random_bits.
  uint32_t random_bits = 0;
};

}  // namespace hg::precision

namespace hg {
using precision::Rounding;
using precision::RoundingOptions;
}  // namespace hg
