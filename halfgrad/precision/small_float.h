// SmallFloat<F>: a value type stored as the bit pattern of a narrow format F (half, bfloat16, fp8,
// the MX element formats) that behaves like a built-in floating-point type; half.h, bfloat16.h,
// float8.h and mx_types.h name the instances, and share everything here so they cannot drift
// apart. Construction, conversions, correctly rounded arithmetic, the _Float16 promotion rules and
// the std customisation points: docs/numerics.md, "The four types" and after.
#pragma once

#include <bit>
#include <cmath>
#include <compare>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

#include "halfgrad/precision/arithmetic.h"
#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/rounding.h"

namespace hg::precision {

template <class T>
concept Arithmetic = std::is_arithmetic_v<T>;

template <FloatFormat F>
class SmallFloat {
  // The finite-only MX element formats (e2m1, ...) have no NaN: an operation without a result
  // there (0/0, a NaN input) throws hg::Error, and numeric_limits says has_quiet_NaN = false.
  // The fnuz formats are used through encode/decode and the *_bits functions: their -0 encoding
  // is the NaN, which the sign-bit operations here (-x, abs, copysign) would produce.
  static_assert(F.valid(), "SmallFloat<F> needs a valid() format");
  static_assert(F.has_negative_zero(),
                "SmallFloat<F> does not take fnuz formats: use encode/decode and the *_bits functions");

 public:
  static constexpr FloatFormat kFormat = F;
  using storage_type = std::conditional_t<F.storage_bits() <= 8, uint8_t, uint16_t>;

  constexpr SmallFloat() = default;  // +0
  // x rounded once to F (bool, char and every integer type, float, double, long double).
  template <Arithmetic T>
  constexpr explicit SmallFloat(T x, RoundingOptions options = {}) : bits_(storage_type(round_from(x, options))) {}
  // Another format's value, rounded once (its value is exact in double).
  // clang-format 14 misplaces C++20 requires clauses:
  // clang-format off
  template <FloatFormat G>
    requires(G != F)
  constexpr explicit SmallFloat(SmallFloat<G> x, RoundingOptions options = {})
      : bits_(storage_type(encode<F>(x.to_double(), options))) {}
  // clang-format on

  static constexpr SmallFloat from_bits(storage_type bits) {
    SmallFloat value;
    value.bits_ = bits;
    return value;
  }
  constexpr storage_type bits() const { return bits_; }

  constexpr float to_float() const { return decode<F>(bits_); }
  constexpr double to_double() const { return double(decode<F>(bits_)); }
  // Widening to a floating type is implicit and exact; to an integer type explicit, the float
  // value converted (truncated) like _Float16's.
  template <std::floating_point T>
  constexpr operator T() const {
    return T(to_float());
  }
  // clang-format 14 misplaces C++20 requires clauses:
  // clang-format off
  template <Arithmetic T>
    requires(!std::floating_point<T>)
  constexpr explicit operator T() const { return T(to_float()); }
  // clang-format on

  constexpr bool is_nan() const { return std::isnan(to_float()); }
  constexpr bool is_inf() const { return std::isinf(to_float()); }
  constexpr bool is_subnormal() const {
    return (bits_ & ~F.sign_mask()) != 0 && (bits_ >> F.mantissa_bits & F.exponent_field_max()) == 0;
  }
  constexpr bool sign_bit() const { return (bits_ & F.sign_mask()) != 0; }

  friend constexpr SmallFloat operator+(SmallFloat a) { return a; }
  friend constexpr SmallFloat operator-(SmallFloat a) {
    return from_bits(storage_type(neg_bits(F, a.bits_)));  // exact, also for NaN and zero
  }
  // Round to nearest even; hg::add(a, b, options) and friends take the other options.
  friend constexpr SmallFloat operator+(SmallFloat a, SmallFloat b) {
    return from_bits(storage_type(add_bits<F>(a.bits_, b.bits_)));
  }
  friend constexpr SmallFloat operator-(SmallFloat a, SmallFloat b) {
    return from_bits(storage_type(sub_bits<F>(a.bits_, b.bits_)));
  }
  friend constexpr SmallFloat operator*(SmallFloat a, SmallFloat b) {
    return from_bits(storage_type(mul_bits<F>(a.bits_, b.bits_)));
  }
  friend constexpr SmallFloat operator/(SmallFloat a, SmallFloat b) {
    return from_bits(storage_type(div_bits<F>(a.bits_, b.bits_)));
  }

  // Mixed with a built-in type: computed in Promoted<T> (see the header comment).
  template <Arithmetic T>
  using Promoted = std::conditional_t<std::is_floating_point_v<T>, T, SmallFloat>;
  template <Arithmetic T>
  friend constexpr Promoted<T> operator+(SmallFloat a, T b) {
    return Promoted<T>(a) + Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr Promoted<T> operator+(T a, SmallFloat b) {
    return Promoted<T>(a) + Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr Promoted<T> operator-(SmallFloat a, T b) {
    return Promoted<T>(a) - Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr Promoted<T> operator-(T a, SmallFloat b) {
    return Promoted<T>(a) - Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr Promoted<T> operator*(SmallFloat a, T b) {
    return Promoted<T>(a) * Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr Promoted<T> operator*(T a, SmallFloat b) {
    return Promoted<T>(a) * Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr Promoted<T> operator/(SmallFloat a, T b) {
    return Promoted<T>(a) / Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr Promoted<T> operator/(T a, SmallFloat b) {
    return Promoted<T>(a) / Promoted<T>(b);
  }

  // x op= y is x = type_of_x(x op y), as for _Float16 (half += float rounds the float sum).
  SmallFloat& operator+=(SmallFloat b) { return *this = *this + b; }
  SmallFloat& operator-=(SmallFloat b) { return *this = *this - b; }
  SmallFloat& operator*=(SmallFloat b) { return *this = *this * b; }
  SmallFloat& operator/=(SmallFloat b) { return *this = *this / b; }
  template <Arithmetic T>
  SmallFloat& operator+=(T b) {
    return *this = SmallFloat(*this + b);
  }
  template <Arithmetic T>
  SmallFloat& operator-=(T b) {
    return *this = SmallFloat(*this - b);
  }
  template <Arithmetic T>
  SmallFloat& operator*=(T b) {
    return *this = SmallFloat(*this * b);
  }
  template <Arithmetic T>
  SmallFloat& operator/=(T b) {
    return *this = SmallFloat(*this / b);
  }
  template <Arithmetic T>
  friend T& operator+=(T& a, SmallFloat b) {
    return a = T(a + b);
  }
  template <Arithmetic T>
  friend T& operator-=(T& a, SmallFloat b) {
    return a = T(a - b);
  }
  template <Arithmetic T>
  friend T& operator*=(T& a, SmallFloat b) {
    return a = T(a * b);
  }
  template <Arithmetic T>
  friend T& operator/=(T& a, SmallFloat b) {
    return a = T(a / b);
  }
  SmallFloat& operator++() { return *this += SmallFloat(1); }
  SmallFloat& operator--() { return *this -= SmallFloat(1); }
  SmallFloat operator++(int) {
    const SmallFloat old = *this;
    ++*this;
    return old;
  }
  SmallFloat operator--(int) {
    const SmallFloat old = *this;
    --*this;
    return old;
  }

  // IEEE comparisons: NaN is unordered, -0 == +0 (values compared exactly as floats); mixed
  // comparisons convert as the arithmetic does (with an integer, the integer rounded to F).
  friend constexpr bool operator==(SmallFloat a, SmallFloat b) { return a.to_float() == b.to_float(); }
  friend constexpr std::partial_ordering operator<=>(SmallFloat a, SmallFloat b) {
    return a.to_float() <=> b.to_float();
  }
  template <Arithmetic T>
  friend constexpr bool operator==(SmallFloat a, T b) {
    return Promoted<T>(a) == Promoted<T>(b);
  }
  template <Arithmetic T>
  friend constexpr std::partial_ordering operator<=>(SmallFloat a, T b) {
    return Promoted<T>(a) <=> Promoted<T>(b);
  }

 private:
  template <Arithmetic T>
  static constexpr uint32_t round_from(T x, const RoundingOptions& options) {
    if constexpr (std::is_same_v<T, long double>) {
      if (!std::isfinite(x) || x == 0) return encode<F>(double(x), options);  // exact in double
      int exponent = 0;
      const long double fraction = std::frexp(std::fabs(x), &exponent);  // in [0.5, 1)
      const auto significand = uint64_t(std::ldexp(fraction, 64));       // exact: 64 bits
      return round_exact<F>(std::signbit(x), significand, exponent - 64, false, options);
    } else if constexpr (std::is_floating_point_v<T>) {
      return encode<F>(double(x), options);  // float and double are exact in double
    } else if constexpr (std::is_signed_v<T>) {
      const uint64_t magnitude = x < 0 ? 0 - uint64_t(int64_t(x)) : uint64_t(x);
      return round_exact<F>(x < 0, magnitude, 0, false, options);
    } else {
      return round_exact<F>(false, uint64_t(x), 0, false, options);
    }
  }

  storage_type bits_ = 0;
};

// The operations with any rounding option, each correctly rounded once (arithmetic.h).
template <FloatFormat F>
constexpr SmallFloat<F> add(SmallFloat<F> a, SmallFloat<F> b, const RoundingOptions& options = {}) {
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(add_bits<F>(a.bits(), b.bits(), options)));
}
template <FloatFormat F>
constexpr SmallFloat<F> sub(SmallFloat<F> a, SmallFloat<F> b, const RoundingOptions& options = {}) {
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(sub_bits<F>(a.bits(), b.bits(), options)));
}
template <FloatFormat F>
constexpr SmallFloat<F> mul(SmallFloat<F> a, SmallFloat<F> b, const RoundingOptions& options = {}) {
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(mul_bits<F>(a.bits(), b.bits(), options)));
}
template <FloatFormat F>
constexpr SmallFloat<F> div(SmallFloat<F> a, SmallFloat<F> b, const RoundingOptions& options = {}) {
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(div_bits<F>(a.bits(), b.bits(), options)));
}
template <FloatFormat F>
SmallFloat<F> sqrt(SmallFloat<F> a, const RoundingOptions& options = {}) {
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(sqrt_bits<F>(a.bits(), options)));
}
template <FloatFormat F>
constexpr SmallFloat<F> fma(SmallFloat<F> a, SmallFloat<F> b, SmallFloat<F> c, const RoundingOptions& options = {}) {
  return SmallFloat<F>::from_bits(
      typename SmallFloat<F>::storage_type(fma_bits<F>(a.bits(), b.bits(), c.bits(), options)));
}

// x converted to format To, rounded once: hg::convert<hg::float8_e4m3>(h, {.saturate = true}).
template <class To, FloatFormat F>
constexpr To convert(SmallFloat<F> x, const RoundingOptions& options = {}) {
  return To::from_bits(typename To::storage_type(encode<To::kFormat>(x.to_double(), options)));
}

// The <cmath> classification and sign functions, for generic code (`using std::isnan;`).
template <FloatFormat F>
constexpr SmallFloat<F> abs(SmallFloat<F> x) {
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(x.bits() & ~F.sign_mask()));
}
template <FloatFormat F>
constexpr SmallFloat<F> fabs(SmallFloat<F> x) {
  return abs(x);
}
template <FloatFormat F>
constexpr bool isnan(SmallFloat<F> x) {
  return x.is_nan();
}
template <FloatFormat F>
constexpr bool isinf(SmallFloat<F> x) {
  return x.is_inf();
}
template <FloatFormat F>
constexpr bool isfinite(SmallFloat<F> x) {
  return !x.is_nan() && !x.is_inf();
}
template <FloatFormat F>
constexpr bool signbit(SmallFloat<F> x) {
  return x.sign_bit();
}

// <cmath>'s exact functions (C23 7.12 semantics, checked against std:: on float for every value
// of the 16-bit formats in tests/precision/test_cmath.cpp). Bit-level twins in arithmetic.h.
template <FloatFormat F>
constexpr SmallFloat<F> copysign(SmallFloat<F> x, SmallFloat<F> y) {
  using S = typename SmallFloat<F>::storage_type;
  return SmallFloat<F>::from_bits(S((x.bits() & ~F.sign_mask()) | (y.bits() & F.sign_mask())));
}
template <FloatFormat F>
constexpr SmallFloat<F> floor(SmallFloat<F> x) {
  return SmallFloat<F>::from_bits(
      typename SmallFloat<F>::storage_type(round_integral_bits(F, x.bits(), Rounding::kDown)));
}
template <FloatFormat F>
constexpr SmallFloat<F> ceil(SmallFloat<F> x) {
  return SmallFloat<F>::from_bits(
      typename SmallFloat<F>::storage_type(round_integral_bits(F, x.bits(), Rounding::kUp)));
}
template <FloatFormat F>
constexpr SmallFloat<F> trunc(SmallFloat<F> x) {
  return SmallFloat<F>::from_bits(
      typename SmallFloat<F>::storage_type(round_integral_bits(F, x.bits(), Rounding::kTowardZero)));
}
template <FloatFormat F>  // halfway cases away from zero
constexpr SmallFloat<F> round(SmallFloat<F> x) {
  return SmallFloat<F>::from_bits(
      typename SmallFloat<F>::storage_type(round_integral_bits(F, x.bits(), Rounding::kNearestAway)));
}
template <FloatFormat F>  // halfway cases to even (the default rounding mode)
constexpr SmallFloat<F> rint(SmallFloat<F> x) {
  return SmallFloat<F>::from_bits(
      typename SmallFloat<F>::storage_type(round_integral_bits(F, x.bits(), Rounding::kNearestEven)));
}
// x * 2^n, rounded once to nearest even (overflow to inf, gradual underflow).
template <FloatFormat F>
constexpr SmallFloat<F> ldexp(SmallFloat<F> x, int n) {
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(ldexp_bits(F, x.bits(), n)));
}
// x = m * 2^*exponent with 0.5 <= |m| < 1 (zero, inf and NaN: m = x, *exponent = 0). m is a
// value of F when F's normals reach down to 0.5, so not for e2m1 and e2m3 (smallest normal 1).
// clang-format 14 misplaces C++20 requires clauses:
// clang-format off
template <FloatFormat F>
  requires(F.min_exponent() <= -1)
SmallFloat<F> frexp(SmallFloat<F> x, int* exponent) {
  *exponent = 0;
  if (x.is_nan() || x.is_inf() || x.to_float() == 0) return x;
  int e = 0;
  const float m = std::frexp(x.to_float(), &e);  // exact: x's bits scaled by a power of two
  *exponent = e;
  return SmallFloat<F>(m);
}
// clang-format on
// The next value of F after x toward y; y if x == y; NaN if either is NaN (C's nextafter).
template <FloatFormat F>
constexpr SmallFloat<F> nextafter(SmallFloat<F> x, SmallFloat<F> y) {
  if (x.is_nan()) return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(next_bits(F, x.bits(), true)));
  if (y.is_nan() || x == y) return y;
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(next_bits(F, x.bits(), y > x)));
}
// nextafter with the direction given as a long double (C's nexttoward); x if x == y.
template <FloatFormat F>
constexpr SmallFloat<F> nexttoward(SmallFloat<F> x, long double y) {
  if (x.is_nan() || std::isnan(y))
    return nextafter(x, SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(F.nan_bits())));
  const long double value = x.to_float();
  if (value == y) return x;
  return SmallFloat<F>::from_bits(typename SmallFloat<F>::storage_type(next_bits(F, x.bits(), y > value)));
}
// The smaller / larger of two values; a NaN operand is ignored (C's fmin/fmax). Of -0 and +0
// fmin returns -0 and fmax +0 (IEEE 754-2019 minimumNumber/maximumNumber; C allows either).
template <FloatFormat F>
constexpr SmallFloat<F> fmin(SmallFloat<F> x, SmallFloat<F> y) {
  if (x.is_nan()) return y;
  if (y.is_nan()) return x;
  if (x == y) return x.sign_bit() ? x : y;
  return x < y ? x : y;
}
template <FloatFormat F>
constexpr SmallFloat<F> fmax(SmallFloat<F> x, SmallFloat<F> y) {
  if (x.is_nan()) return y;
  if (y.is_nan()) return x;
  if (x == y) return x.sign_bit() ? y : x;
  return x > y ? x : y;
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
  std::snprintf(buffer, sizeof buffer, "%.9g (0x%0*x = ", double(value.to_float()), hex_digits, unsigned(value.bits()));
  return buffer + bit_fields(value) + ")";
}

// The value as a float (the stream's precision and flags apply): exact with 9 digits.
template <FloatFormat F>
std::ostream& operator<<(std::ostream& os, SmallFloat<F> value) {
  return os << value.to_float();
}

// The shortest decimal that rounds (nearest even) back to the same value: "0.1" for half(0.1)
// (0.0999755859375), "65504", "inf", "-nan"; a NaN's payload is not spelled out.
template <FloatFormat F>
std::string to_string(SmallFloat<F> value) {
  char buffer[48];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value.to_double());
    if (value.is_nan() || SmallFloat<F>(std::strtod(buffer, nullptr)).bits() == value.bits()) break;
  }
  return buffer;
}

}  // namespace hg::precision

namespace hg {
using precision::abs;
using precision::add;
using precision::bit_fields;
using precision::ceil;
using precision::convert;
using precision::copysign;
using precision::describe;
using precision::div;
using precision::fabs;
using precision::floor;
using precision::fma;
using precision::fmax;
using precision::fmin;
using precision::frexp;
using precision::isfinite;
using precision::isinf;
using precision::isnan;
using precision::ldexp;
using precision::mul;
using precision::nextafter;
using precision::nexttoward;
using precision::rint;
using precision::round;
using precision::signbit;
using precision::SmallFloat;
using precision::sqrt;
using precision::sub;
using precision::to_string;
using precision::trunc;
}  // namespace hg

// Equal values hash equally: -0 and +0 share the hash of +0 (NaNs, unequal to all, do not care).
template <hg::precision::FloatFormat F>
struct std::hash<hg::precision::SmallFloat<F>> {
  size_t operator()(hg::precision::SmallFloat<F> x) const noexcept {
    return std::hash<uint32_t>()(x.bits() == F.sign_mask() ? 0u : uint32_t(x.bits()));
  }
};

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
  static constexpr bool has_quiet_NaN = F.has_nan();
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
  static constexpr int max_exponent = int(F.exponent_field_max()) - F.exponent_bias + (F.has_inf() ? 0 : 1);
  static constexpr int max_exponent10 = int((max_exponent - 1) * 0.30102999566398120);
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr T min() noexcept { return T::from_bits(typename T::storage_type(1u << F.mantissa_bits)); }
  static constexpr T lowest() noexcept { return -max(); }
  static constexpr T max() noexcept { return T::from_bits(typename T::storage_type(F.max_finite_bits())); }
  static constexpr T epsilon() noexcept {  // 2^-M (a subnormal in e2m1)
    return T::from_bits(
        typename T::storage_type(hg::precision::encode<F>(double(hg::precision::exp2_float(-F.mantissa_bits)))));
  }
  static constexpr T round_error() noexcept { return T(0.5f); }
  // Without inf (e4m3) infinity() is the NaN; without NaN (the MX element formats) the NaNs and
  // infinity() are T() (+0), as the standard has it for types without them.
  static constexpr T infinity() noexcept {
    return T::from_bits(typename T::storage_type(F.has_inf() ? F.inf_bits() : F.has_nan() ? F.nan_bits() : 0));
  }
  static constexpr T quiet_NaN() noexcept {
    return T::from_bits(typename T::storage_type(F.has_nan() ? F.nan_bits() : 0));
  }
  static constexpr T signaling_NaN() noexcept {
    return T::from_bits(typename T::storage_type(F.has_inf() ? F.inf_bits() | 1u : F.has_nan() ? F.nan_bits() : 0));
  }
  static constexpr T denorm_min() noexcept { return T::from_bits(typename T::storage_type(1)); }
};
