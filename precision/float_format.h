// The one scalar conversion core: a narrow binary floating-point format described by its field
// widths, the exact rounding step round_exact (integer significand and exponent -> bits), encode
// (double -> bits, every rounding option) and decode (bits -> float).
// Integer-only, after half.hpp/FP16: guard and sticky bits, subnormals handled explicitly. It is
// the reference that the Highway kernels in convert.h must match bit for bit; it is not fast.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "precision/rounding.h"

namespace hg::precision {

enum class Specials : uint8_t {
  kIeee,     // all-ones exponent holds inf (mantissa 0) and NaN (mantissa != 0)
  kNanOnly,  // OCP FP8 E4M3: no inf; all-ones exponent is finite except S.1111.111, the NaN
};

// A format of 1 sign bit, exponent_bits biased by 2^(exponent_bits-1)-1, and mantissa_bits,
// with gradual underflow (subnormals). Structural, so it can be a template argument.
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  Specials specials;

  constexpr int storage_bits() const { return 1 + exponent_bits + mantissa_bits; }
  constexpr int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  constexpr int min_exponent() const { return 1 - bias(); }  // of the smallest normal
  constexpr uint32_t sign_mask() const { return 1u << (exponent_bits + mantissa_bits); }
  constexpr uint32_t mantissa_mask() const { return (1u << mantissa_bits) - 1; }
  constexpr uint32_t exponent_field_max() const { return (1u << exponent_bits) - 1; }
  constexpr uint32_t inf_bits() const { return exponent_field_max() << mantissa_bits; }
  constexpr uint32_t max_finite_bits() const {
    return specials == Specials::kIeee ? inf_bits() - 1 : inf_bits() | (mantissa_mask() - 1);
  }
  constexpr uint32_t nan_bits() const {  // the canonical quiet NaN, positive
    return specials == Specials::kIeee ? inf_bits() | (1u << (mantissa_bits - 1))
                                       : inf_bits() | mantissa_mask();
  }
  constexpr bool has_inf() const { return specials == Specials::kIeee; }
  constexpr bool operator==(const FloatFormat&) const = default;
};

inline constexpr FloatFormat kBinary16{5, 10, Specials::kIeee};  // IEEE 754 half
inline constexpr FloatFormat kBFloat16{8, 7, Specials::kIeee};   // Google brain float
inline constexpr FloatFormat kE4M3{4, 3, Specials::kNanOnly};    // OCP FP8 E4M3 (max 448)
inline constexpr FloatFormat kE5M2{5, 2, Specials::kIeee};       // OCP FP8 E5M2 (max 57344)

constexpr const char* format_name(FloatFormat f) {
  return f == kBinary16   ? "f16"
         : f == kBFloat16 ? "bf16"
         : f == kE4M3     ? "e4m3"
         : f == kE5M2     ? "e5m2"
                          : "custom";
}

// 2^k as a float, for k in [-149, 127]; exact (subnormal below 2^-126).
constexpr float exp2_float(int k) {
  return k >= -126 ? std::bit_cast<float>(uint32_t(k + 127) << 23)
                   : std::bit_cast<float>(1u << (k + 149));
}

// The one rounding step: the real number (significand + s) * 2^exponent, with s = 0 if !sticky
// and some 0 < s < 1 if sticky, rounded to format F with `options`. Exact: the significand is
// shifted so that F's last kept bit is the integer's lowest bit; the discarded bits form a 64-bit
// fraction plus a sticky bit, and the rounding mode decides from them alone. With `sticky` the
// significand must have at least M + 34 bits (M = F.mantissa_bits): then s lies below the
// fraction's top 32 bits, so it can only decide "exact or not" and which side of a tie, and
// stochastic rounding's frac32 is the true value's. Overflow, saturation and flushing as
// RoundingOptions says; a zero significand (without sticky) gives a zero of the given sign.
// encode (below) and the exact arithmetic of arithmetic.h round through here.
template <FloatFormat F>
constexpr uint32_t round_exact(bool negative, uint64_t significand, int exponent, bool sticky,
                               RoundingOptions options = {}) {
  constexpr int M = F.mantissa_bits;
  const uint32_t sign = negative ? F.sign_mask() : 0;
  if (significand == 0 && !sticky) return sign;

  // The value lies in [2^E, 2^(E+1)), E = exponent + bit_width - 1; below the smallest normal
  // the quantum stays 2^(min_exponent - M): subnormal results.
  const int e = std::max(exponent + int(std::bit_width(significand)) - 1, F.min_exponent());
  const int shift = e - M - exponent;  // bits of the significand below F's last kept bit
  uint64_t q = 0, fraction = 0;        // fraction: discarded bits, MSB = one half
  if (shift <= 0) {
    // Only for a significand of at most M + 1 bits (shift >= bit_width - 1 - M), so q < 2^(M+1);
    // exact, and sticky is false here by the precondition.
    q = significand << -shift;
  } else if (shift < 64) {
    q = significand >> shift;
    fraction = significand << (64 - shift);
  } else if (shift < 128) {
    const int below = shift - 64;
    fraction = below < 64 ? significand >> below : 0;
    sticky = sticky || (below > 0 && (below >= 64 || (significand & ((uint64_t{1} << below) - 1)) != 0));
  } else {
    sticky = true;
  }

  const bool inexact = fraction != 0 || sticky;
  constexpr uint64_t kHalf = uint64_t{1} << 63;
  bool away = false;
  switch (options.mode) {
    case Rounding::kNearestEven:
      away = fraction > kHalf || (fraction == kHalf && (sticky || (q & 1) != 0));
      break;
    case Rounding::kNearestAway: away = fraction >= kHalf; break;
    case Rounding::kTowardZero: break;
    case Rounding::kUp: away = inexact && !negative; break;
    case Rounding::kDown: away = inexact && negative; break;
    case Rounding::kStochastic:
      away = (fraction >> 32) + options.random_bits >= (uint64_t{1} << 32);
      break;
  }
  q += away ? 1 : 0;

  // q counts quanta including the implicit bit, so adding it to the exponent field minus one
  // yields the encoding; a carry out of the mantissa (q = 2^(M+1)) bumps the exponent, and for
  // subnormals (e = min_exponent, field 0) q = 2^M becomes the smallest normal by itself.
  const uint64_t magnitude = (uint64_t(e + F.bias() - 1) << M) + q;

  if (magnitude > F.max_finite_bits()) {
    // IEEE 754 7.4: nearest (and stochastic) overflows to inf; a directed mode that points
    // toward zero for this sign stops at the largest finite value.
    bool to_inf = true;
    if (options.mode == Rounding::kTowardZero) to_inf = false;
    if (options.mode == Rounding::kUp) to_inf = !negative;
    if (options.mode == Rounding::kDown) to_inf = negative;
    if (options.saturate || !to_inf) return sign | F.max_finite_bits();
    return sign | (F.has_inf() ? F.inf_bits() : F.nan_bits());
  }
  if (options.flush_subnormals && magnitude < (uint64_t{1} << M)) return sign;
  return sign | uint32_t(magnitude);
}

// Rounds x to format F, once, exactly, for every double (round_exact on its 53-bit significand).
template <FloatFormat F>
constexpr uint32_t encode(double x, RoundingOptions options = {}) {
  constexpr int M = F.mantissa_bits;
  const uint64_t b = std::bit_cast<uint64_t>(x);
  const bool negative = (b >> 63) != 0;
  const uint32_t sign = negative ? F.sign_mask() : 0;
  const int biased = int((b >> 52) & 0x7FF);
  const uint64_t fraction52 = b & ((uint64_t{1} << 52) - 1);

  if (biased == 0x7FF) {
    if (fraction52 != 0) {  // NaN: quiet it, keep the sign and the payload's top bits (as F16C)
      if constexpr (F.has_inf()) return sign | F.nan_bits() | uint32_t(fraction52 >> (52 - M));
      return sign | F.nan_bits();
    }
    if (options.saturate && (options.saturate_inf || !F.has_inf())) return sign | F.max_finite_bits();
    return sign | (F.has_inf() ? F.inf_bits() : F.nan_bits());
  }
  // |x| = significand * 2^(exponent - 52); a double subnormal has no implicit bit.
  if (biased == 0) return round_exact<F>(negative, fraction52, -1074, false, options);
  return round_exact<F>(negative, fraction52 | (uint64_t{1} << 52), biased - 1075, false, options);
}

// The exact value of F's bit pattern `bits` as a float (every value of every format here is a
// float). NaN decodes to a quiet float NaN with the sign and payload kept (as F16C does).
template <FloatFormat F>
constexpr float decode(uint32_t bits) {
  constexpr int M = F.mantissa_bits;
  const uint32_t sign32 = (bits & F.sign_mask()) != 0 ? 0x80000000u : 0;
  const uint32_t field = (bits >> M) & F.exponent_field_max();
  const uint32_t mantissa = bits & F.mantissa_mask();
  if constexpr (F.has_inf()) {
    if (field == F.exponent_field_max()) {
      return std::bit_cast<float>(sign32 | 0x7F800000u | (mantissa << (23 - M)) |
                                  (mantissa != 0 ? 0x00400000u : 0));
    }
  } else {
    if (field == F.exponent_field_max() && mantissa == F.mantissa_mask()) {
      return std::bit_cast<float>(sign32 | 0x7FC00000u);
    }
  }
  if (field == 0) {  // zero or subnormal: mantissa * 2^(min_exponent - M), exact in float
    const float magnitude = float(mantissa) * exp2_float(F.min_exponent() - M);
    return sign32 != 0 ? -magnitude : magnitude;
  }
  const uint32_t exponent32 = field - uint32_t(F.bias()) + 127;
  return std::bit_cast<float>(sign32 | (exponent32 << 23) | (mantissa << (23 - M)));
}

}  // namespace hg::precision

namespace hg {
using precision::decode;
using precision::encode;
using precision::FloatFormat;
}  // namespace hg
