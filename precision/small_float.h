// SmallFloat<F>: a value type stored as the bit pattern of a narrow format F (half, bfloat16,
// fp8), converting and computing through float_format.h. half.h, bfloat16.h and float8.h name
// the instances; this header holds what they share, so the four types cannot drift apart.
//
// Arithmetic widens both operands to f32, computes there, and rounds the f32 result once to F.
// For +, -, *, / and sqrt that is the correctly rounded result in F: f32's 24-bit significand is
// >= 2p + 2 for p = 11 (f16), 8 (bf16), 4 (e4m3), 3 (e5m2), and for such precisions rounding
// twice is innocuous (Figueroa, "When is double rounding innocuous?", 1995). The theorem assumes
// an unbounded exponent. f32's range holds f16's and fp8's with room to spare; bf16 has f32's
// own range, so there f32 can overflow (only beyond bf16's own overflow threshold, so both give
// inf) or go subnormal: below 2^-126 f32 still keeps 16 bits more than bf16 (quantum 2^-149 vs
// 2^-133), a sum there is exact, and a product (16 significant bits) or quotient of bf16 values
// cannot come within 2^-150 of a bf16 midpoint without being on it, so the second rounding stays
// exact. fma is different (a*b+c needs up to ~80 bits for f16, hundreds for bf16): it is computed
// in double with round-to-odd, which makes the second rounding exact (Boldo & Melquiond 2008).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

#include "precision/float_format.h"
#include "precision/rounding.h"

namespace hg::precision {

template <FloatFormat F>
class SmallFloat {
 public:
  static constexpr FloatFormat kFormat = F;
  using storage_type = std::conditional_t<F.storage_bits() <= 8, uint8_t, uint16_t>;

  constexpr SmallFloat() = default;  // +0
  constexpr explicit SmallFloat(float x, RoundingOptions options = {})
      : bits_(storage_type(encode<F>(double(x), options))) {}
  constexpr explicit SmallFloat(double x, RoundingOptions options = {})
      : bits_(storage_type(encode<F>(x, options))) {}

  static constexpr SmallFloat from_bits(storage_type bits) {
    SmallFloat value;
    value.bits_ = bits;
    return value;
  }
  constexpr storage_type bits() const { return bits_; }

  constexpr float to_float() const { return decode<F>(bits_); }
  constexpr double to_double() const { return double(decode<F>(bits_)); }
  constexpr explicit operator float() const { return to_float(); }
  constexpr explicit operator double() const { return to_double(); }

  constexpr bool is_nan() const { return std::isnan(to_float()); }
  constexpr bool is_inf() const { return std::isinf(to_float()); }
  constexpr bool is_subnormal() const {
    return (bits_ & ~F.sign_mask()) != 0 && (bits_ >> F.mantissa_bits & F.exponent_field_max()) == 0;
  }
  constexpr bool sign_bit() const { return (bits_ & F.sign_mask()) != 0; }

  friend constexpr SmallFloat operator-(SmallFloat a) {
    return from_bits(storage_type(a.bits_ ^ F.sign_mask()));  // exact, also for NaN and zero
  }
  friend constexpr SmallFloat operator+(SmallFloat a, SmallFloat b) {
    return SmallFloat(a.to_float() + b.to_float());
  }
  friend constexpr SmallFloat operator-(SmallFloat a, SmallFloat b) {
    return SmallFloat(a.to_float() - b.to_float());
  }
  friend constexpr SmallFloat operator*(SmallFloat a, SmallFloat b) {
    return SmallFloat(a.to_float() * b.to_float());
  }
  friend constexpr SmallFloat operator/(SmallFloat a, SmallFloat b) {
    return SmallFloat(a.to_float() / b.to_float());
  }
  SmallFloat& operator+=(SmallFloat b) { return *this = *this + b; }
  SmallFloat& operator-=(SmallFloat b) { return *this = *this - b; }
  SmallFloat& operator*=(SmallFloat b) { return *this = *this * b; }
  SmallFloat& operator/=(SmallFloat b) { return *this = *this / b; }

  // IEEE comparisons: NaN is unordered, -0 == +0.
  friend constexpr bool operator==(SmallFloat a, SmallFloat b) { return a.to_float() == b.to_float(); }
  friend constexpr bool operator<(SmallFloat a, SmallFloat b) { return a.to_float() < b.to_float(); }
  friend constexpr bool operator<=(SmallFloat a, SmallFloat b) { return a.to_float() <= b.to_float(); }
  friend constexpr bool operator>(SmallFloat a, SmallFloat b) { return a.to_float() > b.to_float(); }
  friend constexpr bool operator>=(SmallFloat a, SmallFloat b) { return a.to_float() >= b.to_float(); }

 private:
  storage_type bits_ = 0;
};

template <FloatFormat F>
SmallFloat<F> sqrt(SmallFloat<F> a) {
  return SmallFloat<F>(std::sqrt(a.to_float()));
}

// a * b + c rounded once. The product of two F values is exact in double and TwoSum gives the
// exact error of the double sum; if it is nonzero and the sum's last bit is even, stepping one
// ulp toward the error makes the sum round-to-odd, which the final rounding to F (53 >= p + 2
// bits) turns into the correctly rounded result.
template <FloatFormat F>
SmallFloat<F> fma(SmallFloat<F> a, SmallFloat<F> b, SmallFloat<F> c) {
  const double product = a.to_double() * b.to_double();
  const double addend = c.to_double();
  double sum = product + addend;
  if (std::isfinite(sum)) {
    const double b_virtual = sum - product;
    const double error = (product - (sum - b_virtual)) + (addend - b_virtual);
    if (error != 0 && (std::bit_cast<uint64_t>(sum) & 1) == 0) {
      sum = std::nextafter(sum, error > 0 ? INFINITY : -INFINITY);
    }
  }
  return SmallFloat<F>(sum);
}

// "0|01111|0000000000": the sign, exponent and mantissa fields of the bit pattern.
template <FloatFormat F>
std::string bit_fields(SmallFloat<F> value) {
  std::string out;
  for (int i = F.storage_bits() - 1; i >= 0; --i) {
    out += char('0' + ((value.bits() >> i) & 1));
    if (i == F.storage_bits() - 1 || i == F.mantissa_bits) out += '|';
  }
  return out;
}

// "6.10351562e-05 (0x0400 = 0|00001|0000000000)": the value with 9 significant digits (enough
// to identify any float, so any F value), the hex bits and the fields.
template <FloatFormat F>
std::string describe(SmallFloat<F> value) {
  char buffer[96];
  const int hex_digits = (F.storage_bits() + 3) / 4;
  std::snprintf(buffer, sizeof buffer, "%.9g (0x%0*x = ", double(value.to_float()), hex_digits,
                unsigned(value.bits()));
  return buffer + bit_fields(value) + ")";
}

template <FloatFormat F>
std::ostream& operator<<(std::ostream& os, SmallFloat<F> value) {
  return os << value.to_float();
}

}  // namespace hg::precision

// std::numeric_limits for every SmallFloat, derived from its format.
template <hg::precision::FloatFormat F>
class std::numeric_limits<hg::precision::SmallFloat<F>> {
  using T = hg::precision::SmallFloat<F>;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = F.has_inf();
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = F.has_inf();  // e4m3 has a single NaN
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = F == hg::precision::kBinary16;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = F.mantissa_bits + 1;
  static constexpr int digits10 = int((digits - 1) * 0.30102999566398120);
  static constexpr int max_digits10 = int(digits * 0.30102999566398120 + 1.999999);  // ceil(1 + digits log10 2)
  static constexpr int radix = 2;
  static constexpr int min_exponent = F.min_exponent() + 1;  // C's convention: 0.5 <= m < 1
  static constexpr int min_exponent10 = int(F.min_exponent() * 0.30102999566398120);
  static constexpr int max_exponent = int(F.exponent_field_max()) - F.bias() + (F.has_inf() ? 0 : 1);
  static constexpr int max_exponent10 = int((max_exponent - 1) * 0.30102999566398120);
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr T min() noexcept { return T::from_bits(typename T::storage_type(1u << F.mantissa_bits)); }
  static constexpr T lowest() noexcept { return -max(); }
  static constexpr T max() noexcept { return T::from_bits(typename T::storage_type(F.max_finite_bits())); }
  static constexpr T epsilon() noexcept {
    return T::from_bits(typename T::storage_type(uint32_t(F.bias() - F.mantissa_bits) << F.mantissa_bits));
  }
  static constexpr T round_error() noexcept { return T(0.5f); }
  static constexpr T infinity() noexcept {
    return T::from_bits(typename T::storage_type(F.has_inf() ? F.inf_bits() : F.nan_bits()));
  }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(typename T::storage_type(F.nan_bits())); }
  static constexpr T signaling_NaN() noexcept {
    return T::from_bits(typename T::storage_type(F.has_inf() ? F.inf_bits() | 1u : F.nan_bits()));
  }
  static constexpr T denorm_min() noexcept { return T::from_bits(typename T::storage_type(1)); }
};
