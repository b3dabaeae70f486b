// The one scalar conversion core: a narrow binary floating-point format described by its fields
// (any format, at compile or run time), the exact rounding step round_exact (integer significand
// and exponent -> bits), encode (double -> bits, every rounding option) and decode (bits -> float).
// Integer-only, after half.hpp/FP16: guard and sticky bits, subnormals handled explicitly. It is
// the reference that the Highway kernels in convert.h must match bit for bit; it is not fast.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "halfgrad/precision/rounding.h"

namespace hg::precision {

// What the all-ones exponent field holds.
enum class Specials : uint8_t {
  kIeee,        // inf (mantissa 0) and NaN (mantissa != 0), as IEEE 754
  kNanOnly,     // OCP FP8 E4M3: no inf; all-ones exponent is finite except S.1..1.1..1, the NaN
  kFiniteOnly,  // OCP MX FP6/FP4 (e3m2, e2m3, e2m1): no inf, no NaN; every encoding is a number
  // "fnuz" (finite, NaN, unsigned zero): no inf and no -0; the one NaN is the -0 encoding
  // (sign bit alone, 0x80); every other encoding is a number, the all-ones ones included.
  // LLVM APFloat's fltNanEncoding::NegativeZero (llvm/llvm-project, llvm/lib/Support/APFloat.cpp:
  // semFloat8E4M3FNUZ, semFloat8E5M2FNUZ), ml_dtypes' float8_e4m3fnuz/float8_e5m2fnuz (jax-ml/ml_dtypes,
  // ml_dtypes/include/float8.h), after Graphcore's formats (arXiv 2206.02915). A result that
  // would be -0 (a negative value rounded to zero, -0 + -0, -1 * 0) is +0.
  kFnuz,
};

// Any binary floating-point format of up to 8 exponent and 15 mantissa bits, as CPFloat describes
// one: 1 sign bit, exponent_bits, mantissa_bits, what the top exponent field means, whether the
// smallest exponent field holds subnormals, and the exponent bias (by default the IEEE one,
// 2^(exponent_bits-1)-1).
// One value describes the format both at compile time (structural: a template argument, as in
// SmallFloat<F>, encode<F>) and at run time (encode(format, x), add_bits(format, a, b)): the same
// code serves both. The presets below name the common formats; `valid()` says which field
// combinations the conversion and arithmetic support.
//
// Without subnormals the format's values are 0 and the normals: values below the smallest normal
// round (in the rounding mode) to 0 or to the smallest normal, ties to 0; encodings with a zero
// exponent field and a nonzero mantissa are never produced and decode as a zero of their sign.
// A kFiniteOnly format has nothing to overflow to: overflow and inf inputs give +-max in every
// mode, and NaN (an input, or 0/0 in arithmetic) has no encoding: hg::Error.
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  Specials specials = Specials::kIeee;
  bool subnormals = true;
  int exponent_bias = exponent_bits >= 1 && exponent_bits <= 8 ? (1 << (exponent_bits - 1)) - 1 : 0;

  constexpr int storage_bits() const { return 1 + exponent_bits + mantissa_bits; }
  constexpr int min_exponent() const { return 1 - exponent_bias; }  // of the smallest normal
  constexpr uint32_t sign_mask() const { return 1u << (exponent_bits + mantissa_bits); }
  constexpr uint32_t mantissa_mask() const { return (1u << mantissa_bits) - 1; }
  constexpr uint32_t exponent_field_max() const { return (1u << exponent_bits) - 1; }
  constexpr uint32_t inf_bits() const { return exponent_field_max() << mantissa_bits; }  // has_inf only
  constexpr uint32_t max_finite_bits() const {
    switch (specials) {
      case Specials::kIeee:
        return inf_bits() - 1;
      case Specials::kNanOnly:
        return inf_bits() | (mantissa_mask() - 1);
      case Specials::kFiniteOnly:
      case Specials::kFnuz:
        break;
    }
    return inf_bits() | mantissa_mask();
  }
  constexpr uint32_t nan_bits() const {  // the canonical quiet NaN, positive (fnuz: 0x80); has_nan only
    return specials == Specials::kIeee   ? inf_bits() | (1u << (mantissa_bits - 1))
           : specials == Specials::kFnuz ? sign_mask()
                                         : inf_bits() | mantissa_mask();
  }
  constexpr bool has_inf() const { return specials == Specials::kIeee; }
  constexpr bool has_nan() const { return specials != Specials::kFiniteOnly; }
  constexpr bool has_negative_zero() const { return specials != Specials::kFnuz; }
  // A zero of the given sign: -0, or +0 where the format has no -0 (fnuz).
  constexpr uint32_t zero_bits(bool negative) const { return negative && has_negative_zero() ? sign_mask() : 0; }
  // Whether the encoding `bits` is a NaN, an infinity.
  constexpr bool is_nan_bits(uint32_t bits) const {
    const uint32_t magnitude = bits & ~sign_mask();
    switch (specials) {
      case Specials::kIeee:
        return magnitude > inf_bits();
      case Specials::kNanOnly:
        return magnitude == (inf_bits() | mantissa_mask());
      case Specials::kFnuz:
        return bits == sign_mask();
      case Specials::kFiniteOnly:
        break;
    }
    return false;
  }
  constexpr bool is_inf_bits(uint32_t bits) const { return has_inf() && (bits & ~sign_mask()) == inf_bits(); }
  // The exponent of the largest finite value: max = (2 - 2^-M) * 2^max_exponent() or less.
  constexpr int max_exponent() const { return int(max_finite_bits() >> mantissa_bits) - exponent_bias; }
  // Fields the conversion and arithmetic support: at most 15 mantissa bits (exact products in
  // arithmetic.h), a mantissa bit to tell NaN from inf where there are specials, and every value
  // (down to the smallest subnormal) a float, so that decode is exact.
  constexpr bool valid() const {
    return exponent_bits >= 1 && exponent_bits <= 8 && mantissa_bits >= 0 && mantissa_bits <= 15 &&
           (mantissa_bits >= 1 || specials == Specials::kFiniteOnly) && min_exponent() - mantissa_bits >= -149 &&
           max_exponent() <= 127;
  }
  constexpr bool operator==(const FloatFormat&) const = default;
};

inline constexpr FloatFormat kBinary16{5, 10, Specials::kIeee};   // IEEE 754 half
inline constexpr FloatFormat kBFloat16{8, 7, Specials::kIeee};    // Google brain float
inline constexpr FloatFormat kTF32{8, 10, Specials::kIeee};       // NVIDIA TensorFloat-32 (19 bits)
inline constexpr FloatFormat kE4M3{4, 3, Specials::kNanOnly};     // OCP FP8 E4M3 (max 448)
inline constexpr FloatFormat kE5M2{5, 2, Specials::kIeee};        // OCP FP8 E5M2 (max 57344)
inline constexpr FloatFormat kE3M2{3, 2, Specials::kFiniteOnly};  // OCP MX FP6 E3M2 (max 28)
inline constexpr FloatFormat kE2M3{2, 3, Specials::kFiniteOnly};  // OCP MX FP6 E2M3 (max 7.5)
inline constexpr FloatFormat kE2M1{2, 1, Specials::kFiniteOnly};  // OCP MX FP4 E2M1 (max 6)
// The fnuz fp8 formats (Specials::kFnuz): bias one above IEEE's. E4M3FNUZ: max 0x7F = 240,
// smallest normal 2^-7, smallest subnormal 2^-10; E5M2FNUZ: max 0x7F = 57344, smallest normal
// 2^-15, smallest subnormal 2^-17 (LLVM's semFloat8E4M3FNUZ = {7, -7, 4, 8}, E5M2FNUZ = {15, -15, 3, 8}).
inline constexpr FloatFormat kE4M3Fnuz{4, 3, Specials::kFnuz, true, 8};
inline constexpr FloatFormat kE5M2Fnuz{5, 2, Specials::kFnuz, true, 16};

constexpr const char* format_name(FloatFormat f) {
  return f == kBinary16   ? "f16"
         : f == kBFloat16 ? "bf16"
         : f == kTF32     ? "tf32"
         : f == kE4M3     ? "e4m3"
         : f == kE5M2     ? "e5m2"
         : f == kE3M2     ? "e3m2"
         : f == kE2M3     ? "e2m3"
         : f == kE2M1     ? "e2m1"
         : f == kE4M3Fnuz ? "e4m3fnuz"
         : f == kE5M2Fnuz ? "e5m2fnuz"
                          : "custom";
}

// "e3m2 (3 exponent, 2 mantissa bits, bias 3, finite only)": every field, for error messages
// and tables (a preset's name, else "custom").
std::string describe_format(FloatFormat f);

namespace detail {
[[noreturn]] void throw_invalid_format(FloatFormat f);                 // hg::Error naming the fields
[[noreturn]] void throw_no_nan(FloatFormat f, const char* what);       // hg::Error
[[noreturn]] void throw_unsupported(FloatFormat f, const char* what);  // hg::Error
constexpr void require_valid(FloatFormat f) {
  if (!f.valid()) throw_invalid_format(f);
}
}  // namespace detail

// 2^k as a float, for k in [-149, 127]; exact (subnormal below 2^-126).
constexpr float exp2_float(int k) {
  return k >= -126 ? std::bit_cast<float>(uint32_t(k + 127) << 23) : std::bit_cast<float>(1u << (k + 149));
}

// The one rounding step: the real number (significand + s) * 2^exponent, with s = 0 if !sticky
// and some 0 < s < 1 if sticky, rounded to format f with `options`. Exact: the significand is
// shifted so that f's last kept bit is the integer's lowest bit; the discarded bits form a 64-bit
// fraction plus a sticky bit, and the rounding mode decides from them alone. With `sticky` the
// significand must have at least M + 34 bits (M = f.mantissa_bits): then s lies below the
// fraction's top 32 bits, so it can only decide "exact or not" and which side of a tie, and
// stochastic rounding's frac32 is the true value's. Overflow, saturation and flushing as
// RoundingOptions says; a zero significand (without sticky) gives a zero of the given sign.
// encode (below) and the exact arithmetic of arithmetic.h round through here. Throws
// hg::Error for a format that is not valid().
constexpr uint32_t round_exact(FloatFormat f, bool negative, uint64_t significand, int exponent, bool sticky,
                               RoundingOptions options = {}) {
  detail::require_valid(f);
  const int M = f.mantissa_bits;
  const uint32_t sign = negative ? f.sign_mask() : 0;
  if (significand == 0 && !sticky) return f.zero_bits(negative);

  // The value lies in [2^E, 2^(E+1)), E = exponent + bit_width - 1; below the smallest normal
  // the quantum stays 2^(min_exponent - M): subnormal results. A format without subnormals has
  // the quantum 2^min_exponent there instead (0 or the smallest normal), so q is 0 or 1.
  const int natural = exponent + int(std::bit_width(significand)) - 1;
  const int e = std::max(natural, f.min_exponent());
  const bool no_subnormal = !f.subnormals && natural < f.min_exponent();
  const int shift = e - (no_subnormal ? 0 : M) - exponent;  // bits below f's last kept bit
  uint64_t q = 0, fraction = 0;                             // fraction: discarded bits, MSB = one half
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
    case Rounding::kNearestAway:
      away = fraction >= kHalf;
      break;
    case Rounding::kTowardZero:
      break;
    case Rounding::kUp:
      away = inexact && !negative;
      break;
    case Rounding::kDown:
      away = inexact && negative;
      break;
    case Rounding::kStochastic:
      away = (fraction >> 32) + options.random_bits >= (uint64_t{1} << 32);
      break;
  }
  q += away ? 1 : 0;

  // q counts quanta including the implicit bit, so adding it to the exponent field minus one
  // yields the encoding; a carry out of the mantissa (q = 2^(M+1)) bumps the exponent, and for
  // subnormals (e = min_exponent, field 0) q = 2^M becomes the smallest normal by itself.
  // Without subnormals q (0 or 1) counts smallest normals.
  const uint64_t magnitude = no_subnormal ? q << M : (uint64_t(e + f.exponent_bias - 1) << M) + q;

  if (magnitude > f.max_finite_bits()) {
    // IEEE 754 7.4: nearest (and stochastic) overflows to inf; a directed mode that points
    // toward zero for this sign stops at the largest finite value.
    bool to_inf = true;
    if (options.mode == Rounding::kTowardZero) to_inf = false;
    if (options.mode == Rounding::kUp) to_inf = !negative;
    if (options.mode == Rounding::kDown) to_inf = negative;
    if (options.saturate || !to_inf || !f.has_nan()) return sign | f.max_finite_bits();
    return sign | (f.has_inf() ? f.inf_bits() : f.nan_bits());
  }
  if (magnitude == 0 || (options.flush_subnormals && magnitude < (uint64_t{1} << M))) {
    return f.zero_bits(negative);
  }
  return sign | uint32_t(magnitude);
}

// Rounds x to format f, once, exactly, for every double (round_exact on its 53-bit
// significand). A NaN input throws hg::Error for a format without NaN.
constexpr uint32_t encode(FloatFormat f, double x, RoundingOptions options = {}) {
  detail::require_valid(f);
  const int M = f.mantissa_bits;
  const uint64_t b = std::bit_cast<uint64_t>(x);
  const bool negative = (b >> 63) != 0;
  const uint32_t sign = negative ? f.sign_mask() : 0;
  const int biased = int((b >> 52) & 0x7FF);
  const uint64_t fraction52 = b & ((uint64_t{1} << 52) - 1);

  if (biased == 0x7FF) {
    if (fraction52 != 0) {  // NaN: quiet it, keep the sign and the payload's top bits (as F16C)
      if (!f.has_nan()) detail::throw_no_nan(f, "encode of a NaN");
      if (f.has_inf()) return sign | f.nan_bits() | uint32_t(fraction52 >> (52 - M));
      return sign | f.nan_bits();
    }
    if (!f.has_nan() || (options.saturate && (options.saturate_inf || !f.has_inf()))) {
      return sign | f.max_finite_bits();
    }
    return sign | (f.has_inf() ? f.inf_bits() : f.nan_bits());
  }
  // |x| = significand * 2^(exponent - 52); a double subnormal has no implicit bit.
  if (biased == 0) return round_exact(f, negative, fraction52, -1074, false, options);
  return round_exact(f, negative, fraction52 | (uint64_t{1} << 52), biased - 1075, false, options);
}

// The exact value of f's bit pattern `bits` as a float (every value of every valid format is a
// float). NaN decodes to a quiet float NaN with the sign and payload kept (as F16C does).
constexpr float decode(FloatFormat f, uint32_t bits) {
  detail::require_valid(f);
  const int M = f.mantissa_bits;
  const uint32_t sign32 = (bits & f.sign_mask()) != 0 ? 0x80000000u : 0;
  const uint32_t field = (bits >> M) & f.exponent_field_max();
  const uint32_t mantissa = bits & f.mantissa_mask();
  if (f.has_inf()) {
    if (field == f.exponent_field_max()) {
      return std::bit_cast<float>(sign32 | 0x7F800000u | (mantissa << (23 - M)) | (mantissa != 0 ? 0x00400000u : 0));
    }
  } else if (f.is_nan_bits(bits)) {
    return std::bit_cast<float>(f.specials == Specials::kFnuz ? 0x7FC00000u : sign32 | 0x7FC00000u);
  }
  // Zero or subnormal: mantissa * 2^(min_exponent - M), exact in float (without subnormals
  // the field-0 encodings are all zeros); a normal times 2^(127 - bias) the same way.
  const float magnitude = field == 0 ? (f.subnormals ? float(mantissa) * exp2_float(f.min_exponent() - M) : 0.0f)
                                     : float((1u << M) | mantissa) * exp2_float(int(field) - f.exponent_bias - M);
  return sign32 != 0 ? -magnitude : magnitude;
}

// The same three for a format known at compile time (SmallFloat<F>, the vector kernels).
// gnu::flatten inlines the run-time function into each instance, where F is a constant, so the
// format's fields fold as they did when these were the templates themselves (the scalar
// arithmetic of SmallFloat was ~10% slower without it).
template <FloatFormat F>
[[gnu::flatten]] constexpr uint32_t round_exact(bool negative, uint64_t significand, int exponent, bool sticky,
                                                RoundingOptions options = {}) {
  return round_exact(F, negative, significand, exponent, sticky, options);
}
template <FloatFormat F>
[[gnu::flatten]] constexpr uint32_t encode(double x, RoundingOptions options = {}) {
  return encode(F, x, options);
}
template <FloatFormat F>
[[gnu::flatten]] constexpr float decode(uint32_t bits) {
  return decode(F, bits);
}

}  // namespace hg::precision

namespace hg {
using precision::decode;
using precision::describe_format;
using precision::encode;
using precision::FloatFormat;
using precision::format_name;
using precision::round_exact;
using precision::Specials;

// The presets by their short names: hg::encode(hg::formats::e2m1, 2.7).
namespace formats {
inline constexpr FloatFormat f16 = precision::kBinary16;
inline constexpr FloatFormat bf16 = precision::kBFloat16;
inline constexpr FloatFormat tf32 = precision::kTF32;
inline constexpr FloatFormat e4m3 = precision::kE4M3;
inline constexpr FloatFormat e5m2 = precision::kE5M2;
inline constexpr FloatFormat e3m2 = precision::kE3M2;
inline constexpr FloatFormat e2m3 = precision::kE2M3;
inline constexpr FloatFormat e2m1 = precision::kE2M1;
inline constexpr FloatFormat e4m3fnuz = precision::kE4M3Fnuz;
inline constexpr FloatFormat e5m2fnuz = precision::kE5M2Fnuz;
}  // namespace formats
}  // namespace hg
