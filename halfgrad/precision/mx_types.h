// Value types for the OCP Microscaling (MX v1.0) element and scale formats, for code that holds
// one element or scale at a time (mx.h quantizes whole vectors into bytes): float6_e3m2,
// float6_e2m3, float4_e2m1 (SmallFloat over the finite-only elements), float8_e8m0 (the shared
// scale) and mxint8 (k / 64). Both of the last convert to float implicitly and exactly, with no
// arithmetic of their own. Values, spec sections and twins elsewhere: docs/formats.md.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <ostream>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/mx.h"
#include "halfgrad/precision/rounding.h"
#include "halfgrad/precision/small_float.h"

namespace hg {
using float6_e3m2 = precision::SmallFloat<precision::kE3M2>;
using float6_e2m3 = precision::SmallFloat<precision::kE2M3>;
using float4_e2m1 = precision::SmallFloat<precision::kE2M1>;
}  // namespace hg

namespace hg::precision {

namespace detail {
[[noreturn]] void throw_e8m0_not_positive(double x);  // hg::Error (mx.cpp)
}  // namespace detail

class Float8E8M0 {
 public:
  static constexpr uint8_t kNanBits = kE8M0Nan;
  constexpr Float8E8M0() = default;  // 1 = 2^0 (code 127): E8M0 has no zero
  // x > 0 rounded to the nearest power of two, a tie (1.5 * 2^k) up: the exponent of x's float
  // rounded to nearest with the implicit bit as its last bit, as PyTorch's
  // fp8e8m0fnu_from_fp32_value (pytorch/pytorch, c10/util/Float8_e8m0fnu-inl.h) does for normal
  // floats. Below 2^-127: 2^-127; 1.5 * 2^127 and above, inf and NaN: NaN. x <= 0 has no
  // encoding: hg::Error.
  constexpr explicit Float8E8M0(double x) : bits_(round_from(x)) {}

  static constexpr Float8E8M0 from_bits(uint8_t bits) {
    Float8E8M0 value;
    value.bits_ = bits;
    return value;
  }
  constexpr uint8_t bits() const { return bits_; }
  constexpr bool is_nan() const { return bits_ == kNanBits; }
  constexpr int exponent() const { return int(bits_) - 127; }  // k of 2^k; not for NaN
  constexpr float to_float() const {
    return is_nan() ? std::numeric_limits<float>::quiet_NaN() : exp2_float(exponent());
  }
  constexpr operator float() const { return to_float(); }  // implicit: exact (then to double too)

  // As floats: NaN is unordered.
  friend constexpr bool operator==(Float8E8M0 a, Float8E8M0 b) { return a.to_float() == b.to_float(); }
  friend constexpr std::partial_ordering operator<=>(Float8E8M0 a, Float8E8M0 b) {
    return a.to_float() <=> b.to_float();
  }
  friend std::ostream& operator<<(std::ostream& os, Float8E8M0 x) { return os << x.to_float(); }

 private:
  static constexpr uint8_t round_from(double x) {
    if (std::isnan(x) || std::isinf(x)) return kNanBits;
    if (x <= 0) detail::throw_e8m0_not_positive(x);
    // x = m * 2^e with 0.5 <= m < 1, so x lies in [2^(e-1), 2^e), whose midpoint is 0.75 * 2^e.
    int e = 0;
    const double m = std::frexp(x, &e);
    const int k = m >= 0.75 ? e : e - 1;
    if (k < -127) return 0;
    if (k > 127) return kNanBits;
    return uint8_t(k + 127);
  }

  uint8_t bits_ = 127;
};

class MxInt8 {
 public:
  constexpr MxInt8() = default;  // 0
  // x rounded once to a multiple of 1/64 in `options`' mode, saturating to +-127/64 (an inf
  // too); a NaN has no encoding: hg::Error. Through kMxInt8Element (mx.h), whose sign-magnitude
  // bits are k itself.
  constexpr explicit MxInt8(double x, RoundingOptions options = {}) {
    options.saturate = true;
    bits_ = mxint8_byte(encode(kMxInt8Element, x, options));
  }

  static constexpr MxInt8 from_bits(uint8_t bits) {  // two's complement k
    MxInt8 value;
    value.bits_ = bits;
    return value;
  }
  constexpr uint8_t bits() const { return bits_; }
  constexpr int k() const { return int8_t(bits_); }
  constexpr float to_float() const { return float(k()) / 64; }  // exact
  constexpr operator float() const { return to_float(); }       // implicit: exact (then to double too)

  friend constexpr bool operator==(MxInt8 a, MxInt8 b) { return a.bits_ == b.bits_; }
  friend constexpr std::strong_ordering operator<=>(MxInt8 a, MxInt8 b) { return a.k() <=> b.k(); }
  friend std::ostream& operator<<(std::ostream& os, MxInt8 x) { return os << x.to_float(); }

 private:
  uint8_t bits_ = 0;
};

}  // namespace hg::precision

namespace hg {
using float8_e8m0 = precision::Float8E8M0;
using mxint8 = precision::MxInt8;
}  // namespace hg

template <>
class std::numeric_limits<hg::precision::Float8E8M0> {
  using T = hg::precision::Float8E8M0;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = false;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm = std::denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 1;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 2;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -126;  // C's convention: min() = 0.5 * 2^min_exponent
  static constexpr int min_exponent10 = -38;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr T min() noexcept { return T::from_bits(0); }        // 2^-127
  static constexpr T lowest() noexcept { return T::from_bits(0); }     // no negative values
  static constexpr T max() noexcept { return T::from_bits(254); }      // 2^127
  static constexpr T epsilon() noexcept { return T::from_bits(127); }  // 2 - 1
  static constexpr T round_error() noexcept { return T::from_bits(126); }
  static constexpr T infinity() noexcept { return T::from_bits(T::kNanBits); }  // none: NaN
  static constexpr T quiet_NaN() noexcept { return T::from_bits(T::kNanBits); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(T::kNanBits); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0); }
};
