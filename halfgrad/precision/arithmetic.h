// Correctly rounded arithmetic on bit patterns of any format (float_format.h; a run-time value,
// add_bits(hg::formats::e2m1, a, b), or a template argument, add_bits<F>(a, b)): +, -, *, /, sqrt
// and fma under every RoundingOptions, each computed exactly (or as an exact truncation plus a
// sticky bit) in integers and rounded once by round_exact. SmallFloat's operators are thin
// wrappers. Why each result is exact, and the special values: docs/numerics.md, "Arithmetic".
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/rounding.h"

namespace hg::precision {
namespace detail {

// A value of f taken apart: |x| = significand * 2^exponent exactly when finite.
struct Unpacked {
  bool negative = false, nan = false, inf = false;
  uint64_t significand = 0;
  int exponent = 0;
};

constexpr Unpacked unpack(FloatFormat f, uint32_t bits) {
  require_valid(f);
  const int M = f.mantissa_bits;
  Unpacked u;
  u.negative = (bits & f.sign_mask()) != 0;
  const uint32_t field = (bits >> M) & f.exponent_field_max();
  const uint32_t mantissa = bits & f.mantissa_mask();
  if (f.is_nan_bits(bits) || f.is_inf_bits(bits)) {
    u.nan = f.is_nan_bits(bits);
    u.inf = !u.nan;
    return u;
  }
  // Without subnormals the field-0 encodings are zeros (float_format.h).
  u.significand = field != 0 ? mantissa | (uint64_t{1} << M) : f.subnormals ? mantissa : 0;
  u.exponent = (field == 0 ? f.min_exponent() : int(field) - f.exponent_bias) - M;
  return u;
}

constexpr uint32_t quiet_nan(FloatFormat f, uint32_t bits) {
  if (f.has_inf()) return bits | (1u << (f.mantissa_bits - 1));
  return (bits & f.sign_mask()) | f.nan_bits();  // e4m3 has one NaN per sign
}

// The result of an invalid operation `what`; a format without NaN has none: hg::Error.
constexpr uint32_t invalid_nan(FloatFormat f, const char* what) {
  if (!f.has_nan()) throw_no_nan(f, what);
  return f.sign_mask() | f.nan_bits();
}

constexpr uint32_t infinite(FloatFormat f, bool negative, const RoundingOptions& options) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return encode(f, negative ? -kInf : kInf, options);
}

// (-1)^na sa 2^ea + (-1)^nb sb 2^eb rounded once; sa, sb < 2^32 (see the header comment).
constexpr uint32_t round_sum(FloatFormat f, bool na, uint64_t sa, int ea, bool nb, uint64_t sb, int eb,
                             const RoundingOptions& options) {
  const bool down = options.mode == Rounding::kDown;
  if (sa == 0 && sb == 0) return f.zero_bits(down ? na || nb : na && nb);
  if (sb == 0) return round_exact(f, na, sa, ea, false, options);
  if (sa == 0) return round_exact(f, nb, sb, eb, false, options);
  const int ka = 62 - int(std::bit_width(sa)), kb = 62 - int(std::bit_width(sb));
  sa <<= ka, ea -= ka, sb <<= kb, eb -= kb;  // both in [2^61, 2^62)
  if (ea < eb || (ea == eb && sa < sb)) {    // a: the larger magnitude
    std::swap(na, nb), std::swap(sa, sb), std::swap(ea, eb);
  }
  const int d = ea - eb;
  const uint64_t aligned = d < 64 ? sb >> d : 0;
  const bool sticky = d >= 64 || (d > 0 && (sb & ((uint64_t{1} << d) - 1)) != 0);
  if (na == nb) return round_exact(f, na, sa + aligned, ea, sticky, options);
  const uint64_t difference = sa - aligned - (sticky ? 1 : 0);
  if (difference == 0 && !sticky) return f.zero_bits(down);  // exact cancellation
  return round_exact(f, na, difference, ea, sticky, options);
}

// floor(sqrt(n)) for 2^124 <= n < 2^126: a double estimate (relative error ~2^-52) and one
// Newton step from it land within one of the root, from above; the loops make it exact.
inline uint64_t isqrt(unsigned __int128 n) {
  uint64_t r = uint64_t(std::sqrt(double(n)));
  r = uint64_t((r + n / r) / 2);
  while ((unsigned __int128)r * r > n) --r;
  while ((unsigned __int128)(r + 1) * (r + 1) <= n) ++r;
  return r;
}

}  // namespace detail

constexpr uint32_t add_bits(FloatFormat f, uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  const detail::Unpacked x = detail::unpack(f, a), y = detail::unpack(f, b);
  if (x.nan) return detail::quiet_nan(f, a);
  if (y.nan) return detail::quiet_nan(f, b);
  if (x.inf || y.inf) {
    if (x.inf && y.inf && x.negative != y.negative) return detail::invalid_nan(f, "inf - inf");
    return detail::infinite(f, x.inf ? x.negative : y.negative, options);
  }
  return detail::round_sum(f, x.negative, x.significand, x.exponent, y.negative, y.significand, y.exponent, options);
}

// -a, exact: the sign bit flipped (NaN included), except that fnuz's zero stays +0 (its -0
// encoding is the NaN).
constexpr uint32_t neg_bits(FloatFormat f, uint32_t a) {
  if (!f.has_negative_zero() && (a & ~f.sign_mask()) == 0) return a;
  return a ^ f.sign_mask();
}

constexpr uint32_t sub_bits(FloatFormat f, uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  if (detail::unpack(f, b).nan && !detail::unpack(f, a).nan) return detail::quiet_nan(f, b);
  return add_bits(f, a, neg_bits(f, b), options);
}

constexpr uint32_t mul_bits(FloatFormat f, uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  const detail::Unpacked x = detail::unpack(f, a), y = detail::unpack(f, b);
  if (x.nan) return detail::quiet_nan(f, a);
  if (y.nan) return detail::quiet_nan(f, b);
  const bool negative = x.negative != y.negative;
  if (x.inf || y.inf) {
    if ((!x.inf && x.significand == 0) || (!y.inf && y.significand == 0)) return detail::invalid_nan(f, "0 * inf");
    return detail::infinite(f, negative, options);
  }
  return round_exact(f, negative, x.significand * y.significand, x.exponent + y.exponent, false, options);
}

constexpr uint32_t div_bits(FloatFormat f, uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  const detail::Unpacked x = detail::unpack(f, a), y = detail::unpack(f, b);
  if (x.nan) return detail::quiet_nan(f, a);
  if (y.nan) return detail::quiet_nan(f, b);
  const bool negative = x.negative != y.negative;
  const uint32_t zero = f.zero_bits(negative);
  if (x.inf) return y.inf ? detail::invalid_nan(f, "inf / inf") : detail::infinite(f, negative, options);
  if (y.inf) return zero;
  if (y.significand == 0) {
    return x.significand == 0 ? detail::invalid_nan(f, "0 / 0") : detail::infinite(f, negative, options);
  }
  if (x.significand == 0) return zero;
  const int ka = 63 - int(std::bit_width(x.significand)), kb = 63 - int(std::bit_width(y.significand));
  const uint64_t sa = x.significand << ka, sb = y.significand << kb;  // in [2^62, 2^63)
  const unsigned __int128 n = (unsigned __int128)sa << 63;
  const uint64_t q = uint64_t(n / sb);  // sa / sb in (1/2, 2): q in (2^62, 2^64)
  const bool sticky = (unsigned __int128)q * sb != n;
  return round_exact(f, negative, q, (x.exponent - ka) - (y.exponent - kb) - 63, sticky, options);
}

inline uint32_t sqrt_bits(FloatFormat f, uint32_t a, const RoundingOptions& options = {}) {
  const detail::Unpacked x = detail::unpack(f, a);
  if (x.nan) return detail::quiet_nan(f, a);
  if (!x.inf && x.significand == 0) return a;  // sqrt(+-0) = +-0
  if (x.negative) return detail::invalid_nan(f, "sqrt of a negative number");
  if (x.inf) return detail::infinite(f, false, options);
  int t = 125 - int(std::bit_width(x.significand));  // radicand in [2^124, 2^126) ...
  if (((x.exponent - t) & 1) != 0) ++t;              // ... times an even power of two
  const unsigned __int128 n = (unsigned __int128)x.significand << t;
  const uint64_t r = detail::isqrt(n);
  return round_exact(f, false, r, (x.exponent - t) / 2, (unsigned __int128)r * r != n, options);
}

// a * b + c with one rounding (IEEE 754 fusedMultiplyAdd).
constexpr uint32_t fma_bits(FloatFormat f, uint32_t a, uint32_t b, uint32_t c, const RoundingOptions& options = {}) {
  const detail::Unpacked x = detail::unpack(f, a), y = detail::unpack(f, b), z = detail::unpack(f, c);
  if (x.nan) return detail::quiet_nan(f, a);
  if (y.nan) return detail::quiet_nan(f, b);
  const bool product_negative = x.negative != y.negative;
  if (x.inf || y.inf) {
    if ((!x.inf && x.significand == 0) || (!y.inf && y.significand == 0)) return detail::invalid_nan(f, "0 * inf");
    if (z.nan) return detail::quiet_nan(f, c);
    if (z.inf && z.negative != product_negative) return detail::invalid_nan(f, "inf - inf");
    return detail::infinite(f, product_negative, options);
  }
  if (z.nan) return detail::quiet_nan(f, c);
  if (z.inf) return detail::infinite(f, z.negative, options);
  return detail::round_sum(f, product_negative, x.significand * y.significand, x.exponent + y.exponent, z.negative,
                           z.significand, z.exponent, options);
}

// x rounded to an integral value of f in `mode` (C's floor: kDown, ceil: kUp, trunc: kTowardZero,
// round: kNearestAway, rint: kNearestEven), exact: an integral result is representable, since
// every value of f at or above 2^M is an integer and the integers up to 2^(M+1) are values of f.
// A zero result keeps x's sign (ceil(-0.5) = -0; +0 in fnuz); NaN, inf and integers are returned
// (NaN quieted). Not kStochastic (hg::Error).
constexpr uint32_t round_integral_bits(FloatFormat f, uint32_t a, Rounding mode) {
  const detail::Unpacked x = detail::unpack(f, a);
  if (x.nan) return detail::quiet_nan(f, a);
  if (x.inf || x.significand == 0 || x.exponent >= 0) return a;
  if (mode == Rounding::kStochastic) detail::throw_unsupported(f, "round_integral_bits with kStochastic");
  // |x| = significand * 2^exponent, exponent < 0, significand < 2^16: the integer part q and
  // the discarded fraction r / 2^shift (a value below 2^-16 has q = 0 and 0 < r < half).
  const int shift = -x.exponent;
  const uint64_t q = shift < 32 ? x.significand >> shift : 0;
  const uint64_t r = shift < 32 ? x.significand & ((uint64_t{1} << shift) - 1) : 1;
  const uint64_t half = shift < 32 ? uint64_t{1} << (shift - 1) : 2;
  bool away = false;
  switch (mode) {
    case Rounding::kNearestEven:
      away = r > half || (r == half && (q & 1) != 0);
      break;
    case Rounding::kNearestAway:
      away = r >= half;
      break;
    case Rounding::kTowardZero:
    case Rounding::kStochastic:
      break;
    case Rounding::kUp:
      away = r != 0 && !x.negative;
      break;
    case Rounding::kDown:
      away = r != 0 && x.negative;
      break;
  }
  return round_exact(f, x.negative, q + (away ? 1 : 0), 0, false);
}

// x * 2^n rounded once (C's ldexp/scalbn; overflow and underflow as in every rounding).
constexpr uint32_t ldexp_bits(FloatFormat f, uint32_t a, int n, const RoundingOptions& options = {}) {
  const detail::Unpacked x = detail::unpack(f, a);
  if (x.nan) return detail::quiet_nan(f, a);
  if (x.inf || x.significand == 0) return a;
  n = std::clamp(n, -1024, 1024);  // beyond any valid format's range either way
  return round_exact(f, x.negative, x.significand, x.exponent + n, false, options);
}

// The neighbour of x toward +inf (up) or -inf: C's nextafter(x, +-inf) in f. From a zero of
// either sign to the smallest value of the direction's sign; from -smallest up to -0 (+0 in
// fnuz); past max to inf, or where f has none to its NaN (e4m3, fnuz) or max (finite-only
// formats: nothing lies beyond); from -inf up to -max; NaN is returned (quieted).
constexpr uint32_t next_bits(FloatFormat f, uint32_t a, bool up) {
  if (f.is_nan_bits(a)) return detail::quiet_nan(f, a);
  const bool negative = (a & f.sign_mask()) != 0;
  const uint32_t sign = negative ? f.sign_mask() : 0;
  const uint32_t magnitude = a & ~f.sign_mask();
  const uint32_t smallest = f.subnormals ? 1u : 1u << f.mantissa_bits;
  if (f.is_inf_bits(a)) return negative == up ? sign | f.max_finite_bits() : a;
  if (magnitude < smallest) return (up ? 0 : f.sign_mask()) | smallest;  // a zero
  if (negative != up) {                                                  // away from zero
    if (magnitude == f.max_finite_bits()) {
      if (f.has_inf()) return sign | f.inf_bits();
      return f.has_nan() ? f.nan_bits() | (f.has_negative_zero() ? sign : 0) : a;
    }
    return sign | (magnitude + 1);
  }
  if (magnitude == smallest) return f.zero_bits(negative);
  return sign | (magnitude - 1);
}

// The same operations for a format known at compile time (SmallFloat<F>'s operators), each
// flattened so that F folds (see encode<F> in float_format.h).
template <FloatFormat F>
[[gnu::flatten]] constexpr uint32_t add_bits(uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  return add_bits(F, a, b, options);
}
template <FloatFormat F>
[[gnu::flatten]] constexpr uint32_t sub_bits(uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  return sub_bits(F, a, b, options);
}
template <FloatFormat F>
[[gnu::flatten]] constexpr uint32_t mul_bits(uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  return mul_bits(F, a, b, options);
}
template <FloatFormat F>
[[gnu::flatten]] constexpr uint32_t div_bits(uint32_t a, uint32_t b, const RoundingOptions& options = {}) {
  return div_bits(F, a, b, options);
}
template <FloatFormat F>
[[gnu::flatten]] uint32_t sqrt_bits(uint32_t a, const RoundingOptions& options = {}) {
  return sqrt_bits(F, a, options);
}
template <FloatFormat F>
[[gnu::flatten]] constexpr uint32_t fma_bits(uint32_t a, uint32_t b, uint32_t c, const RoundingOptions& options = {}) {
  return fma_bits(F, a, b, c, options);
}

}  // namespace hg::precision

namespace hg {
// The bit-level operations beside hg::encode and hg::decode: hg::add_bits(hg::formats::e2m1, a, b).
using precision::add_bits;
using precision::div_bits;
using precision::fma_bits;
using precision::ldexp_bits;
using precision::mul_bits;
using precision::neg_bits;
using precision::next_bits;
using precision::round_integral_bits;
using precision::sqrt_bits;
using precision::sub_bits;
}  // namespace hg
