// The <cmath> functions of SmallFloat (halfgrad/precision/small_float.h) and their bit-level twins
// (arithmetic.h) against std:: on float, for every value of every value type: half and bfloat16
// (2^16 values each; a sample in the sanitized tree), e4m3, e5m2 and the MX element types (e3m2,
// e2m3, e2m1). Each function's result is a value of the format (or a rounding of an exact double,
// for ldexp), so the oracle is the float function's result converted back: exact bits, NaN only
// as NaN (a payload may differ), and a zero's sign compared too. Implicit widening and the
// ternary with float are checked at compile time.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/float8.h"
#include "halfgrad/precision/half.h"
#include "halfgrad/precision/mx_types.h"
#include "tests/sweep_stride.h"

namespace cmath_test {

using hg::bfloat16;
using hg::float4_e2m1;
using hg::float6_e2m3;
using hg::float6_e3m2;
using hg::float8_e4m3;
using hg::float8_e5m2;
using hg::half;

// C++23 std::float16_t's conversions: widening implicit, narrowing explicit; the ternary with a
// float is a float, with a double a double.
static_assert(std::is_convertible_v<half, float> && std::is_convertible_v<float4_e2m1, double>);
static_assert(!std::is_convertible_v<float, half> && !std::is_convertible_v<half, int>);
static_assert(std::is_same_v<decltype(true ? half() : 0.5f), float>);
static_assert(std::is_same_v<decltype(true ? bfloat16() : 0.5), double>);
constexpr float kWidened = half(0.25f);
static_assert(kWidened == 0.25f);

// The same value, or both NaN; a zero's sign must match as well.
template <class T>
bool same(T got, T want) {
  if (want.is_nan()) return got.is_nan();
  return got.bits() == want.bits();
}

// REQUIRE on failure only: Catch2's per-assertion cost would dominate these sweeps (millions of
// comparisons), so a check costs a comparison and a failure names the values.
// Every bit pattern of T, in a vector: hg::all_values' views::iota does not compile with clang 14
// and libstdc++ 12 (the fuzz tree's compiler), which this file should not depend on. The sanitized
// tree takes every kSweepStride-th pattern of the 16-bit formats, the low bits rotating so that
// every residue occurs (tests/sweep_stride.h: there ldexp and fmin/fmax over all of them took 18
// of the file's 26 s).
template <class T>
std::vector<T> every_value() {
  constexpr uint32_t kCount = 1u << T::kFormat.storage_bits();
  const uint32_t stride = kCount > 256 ? uint32_t(hg::testing::kSweepStride) : 1;
  std::vector<T> values;
  for (uint32_t k = 0; k * stride < kCount; ++k)
    values.push_back(T::from_bits(typename T::storage_type(k * stride + k % stride)));
  return values;
}

#define CMATH_REQUIRE(condition, context)                       \
  do {                                                          \
    if (!(condition)) FAIL(#condition << " for " << (context)); \
  } while (false)

template <class T>
void check_rounding_functions() {
  for (const T x : every_value<T>()) {
    const float f = x;
    CMATH_REQUIRE(same(hg::floor(x), T(std::floor(f))), hg::describe(x));
    CMATH_REQUIRE(same(hg::ceil(x), T(std::ceil(f))), hg::describe(x));
    CMATH_REQUIRE(same(hg::trunc(x), T(std::trunc(f))), hg::describe(x));
    CMATH_REQUIRE(same(hg::round(x), T(std::round(f))), hg::describe(x));
    CMATH_REQUIRE(same(hg::rint(x), T(std::rint(f))), hg::describe(x));  // the default environment: nearest even
    CMATH_REQUIRE(same(hg::fabs(x), T(std::fabs(f))), hg::describe(x));
    for (const float sign : {1.0f, -1.0f, 0.0f, -0.0f}) {
      if (!x.is_nan()) CMATH_REQUIRE(same(hg::copysign(x, T(sign)), T(std::copysign(f, sign))), hg::describe(x));
      CMATH_REQUIRE(hg::copysign(x, T(sign)).sign_bit() == std::signbit(sign), hg::describe(x));
    }
  }
}

template <class T>
void check_ldexp_frexp() {
  for (const T x : every_value<T>()) {
    for (int n = -40; n <= 40; ++n) {
      // x * 2^n is exact in double over this range; T(...) rounds it once (nearest even).
      CMATH_REQUIRE(same(hg::ldexp(x, n), T(std::ldexp(double(x), n))), hg::describe(x) + ", n = " + std::to_string(n));
    }
    if constexpr (T::kFormat.min_exponent() <= -1) {
      int e = 0, want_e = 0;
      const T m = hg::frexp(x, &e);
      const float want = std::frexp(float(x), &want_e);
      CMATH_REQUIRE(same(m, T(want)), hg::describe(x));
      if (!x.is_nan() && !x.is_inf()) CMATH_REQUIRE(e == want_e, hg::describe(x));
    }
  }
}

// nextafter toward +-inf: the smallest value of T above x is float's next value above x
// rounded up (toward +inf); below, rounded down. nexttoward takes the direction as a long
// double, so it reaches past max in e4m3 and the MX formats, which have no inf.
template <class T>
void check_next() {
  constexpr long double kInf = std::numeric_limits<long double>::infinity();
  const T top = std::numeric_limits<T>::max(), bottom = std::numeric_limits<T>::lowest();
  for (const T x : every_value<T>()) {
    const float f = x;
    const T up = T(std::nextafter(f, std::numeric_limits<float>::infinity()), {.mode = hg::Rounding::kUp});
    const T down = T(std::nextafter(f, -std::numeric_limits<float>::infinity()), {.mode = hg::Rounding::kDown});
    CMATH_REQUIRE(same(hg::nexttoward(x, kInf), up), hg::describe(x));
    CMATH_REQUIRE(same(hg::nexttoward(x, -kInf), down), hg::describe(x));
    CMATH_REQUIRE(same(hg::nexttoward(x, (long double)f), x), hg::describe(x));
    if (!x.is_nan() && x < top) CMATH_REQUIRE(same(hg::nextafter(x, top), up), hg::describe(x));
    if (!x.is_nan() && x > bottom) CMATH_REQUIRE(same(hg::nextafter(x, bottom), down), hg::describe(x));
    CMATH_REQUIRE(same(hg::nextafter(x, x), x), hg::describe(x));
  }
}

// fmin/fmax against std:: over pairs: every pair for the 8-bit and smaller formats, x against a
// spread of y values for the 16-bit ones. A pair of zeros of either sign is C's free choice:
// -0 for fmin, +0 for fmax here.
template <class T>
void check_fmin_fmax() {
  // Every pair of the small formats; for 16-bit ones every x against every 251st y (a prime
  // stride, so y meets every exponent and many mantissas), every 2003rd in the sanitized tree
  // (tests/sweep_stride.h), where the x are a sample too (every_value).
  const bool all_pairs = T::kFormat.storage_bits() <= 8;
  const uint32_t y_stride = all_pairs ? 1 : (hg::testing::kSweepStride == 1 ? 251 : 2003);
  for (const T x : every_value<T>()) {
    for (uint32_t yb = 0; yb < (1u << T::kFormat.storage_bits()); yb += y_stride) {
      const T y = T::from_bits(typename T::storage_type(yb));
      if (!x.is_nan() && !y.is_nan() && float(x) == 0 && float(y) == 0) {
        CMATH_REQUIRE(hg::fmin(x, y).sign_bit() == (x.sign_bit() || y.sign_bit()),
                      hg::describe(x) + " and " + hg::describe(y));
        CMATH_REQUIRE(hg::fmax(x, y).sign_bit() == (x.sign_bit() && y.sign_bit()),
                      hg::describe(x) + " and " + hg::describe(y));
        continue;
      }
      CMATH_REQUIRE(same(hg::fmin(x, y), T(std::fmin(float(x), float(y)))),
                    hg::describe(x) + " and " + hg::describe(y));
      CMATH_REQUIRE(same(hg::fmax(x, y), T(std::fmax(float(x), float(y)))),
                    hg::describe(x) + " and " + hg::describe(y));
    }
  }
}

}  // namespace cmath_test

TEMPLATE_TEST_CASE("floor ceil trunc round rint fabs copysign match std:: on float for every value",
                   "[precision][cmath]", hg::half, hg::bfloat16, hg::float8_e4m3, hg::float8_e5m2, hg::float6_e3m2,
                   hg::float6_e2m3, hg::float4_e2m1) {
  cmath_test::check_rounding_functions<TestType>();
}

TEMPLATE_TEST_CASE("ldexp rounds once and frexp is exact for every value", "[precision][cmath]", hg::half, hg::bfloat16,
                   hg::float8_e4m3, hg::float8_e5m2, hg::float6_e3m2, hg::float6_e2m3, hg::float4_e2m1) {
  cmath_test::check_ldexp_frexp<TestType>();
}

TEMPLATE_TEST_CASE("nextafter and nexttoward step to the neighbouring value for every value", "[precision][cmath]",
                   hg::half, hg::bfloat16, hg::float8_e4m3, hg::float8_e5m2, hg::float6_e3m2, hg::float6_e2m3,
                   hg::float4_e2m1) {
  cmath_test::check_next<TestType>();
}

TEMPLATE_TEST_CASE("fmin and fmax ignore a NaN and order -0 below +0", "[precision][cmath]", hg::half, hg::bfloat16,
                   hg::float8_e4m3, hg::float8_e5m2, hg::float6_e3m2, hg::float6_e2m3, hg::float4_e2m1) {
  cmath_test::check_fmin_fmax<TestType>();
}

TEST_CASE("nextafter at the ends of half's range, by hand", "[precision][cmath]") {
  using hg::half;
  const half inf = std::numeric_limits<half>::infinity();
  // 65504 = 0x7BFF steps to inf 0x7C00; -0 up to the smallest subnormal 0x0001; its negative
  // up to -0 (0x8000); -inf up to -65504 (0xFBFF).
  CHECK(hg::nextafter(half::from_bits(0x7BFF), inf).bits() == 0x7C00);
  CHECK(hg::nextafter(half::from_bits(0x8000), inf).bits() == 0x0001);
  CHECK(hg::nextafter(half::from_bits(0x8001), inf).bits() == 0x8000);
  CHECK(hg::nextafter(-inf, half(0.0f)).bits() == 0xFBFF);
  // e4m3 has no inf: past 448 (0x7E) lies its NaN (0x7F).
  CHECK(hg::nexttoward(hg::float8_e4m3::from_bits(0x7E), 1e9L).bits() == 0x7F);
  // e2m1 has neither: 6 (0x7) stays 6.
  CHECK(hg::nexttoward(hg::float4_e2m1::from_bits(0x7), 1e9L).bits() == 0x7);
}

TEST_CASE("the bit-level functions are reachable beside hg::encode", "[precision][cmath]") {
  constexpr hg::FloatFormat f = hg::formats::e2m1;
  const uint32_t one = hg::encode(f, 1.0), two = hg::encode(f, 2.0);
  CHECK(hg::add_bits(f, one, one) == two);
  CHECK(hg::decode(f, hg::sub_bits(f, two, one)) == 1.0f);
  CHECK(hg::decode(f, hg::mul_bits(f, two, two)) == 4.0f);
  CHECK(hg::decode(f, hg::div_bits(f, one, two)) == 0.5f);
  CHECK(hg::decode(f, hg::fma_bits(f, two, two, two)) == 6.0f);
  CHECK(hg::decode(f, hg::sqrt_bits(f, hg::encode(f, 4.0))) == 2.0f);
  CHECK(hg::decode(f, hg::neg_bits(f, one)) == -1.0f);
  CHECK(hg::decode(f, hg::ldexp_bits(f, one, 2)) == 4.0f);
  CHECK(hg::decode(f, hg::next_bits(f, one, true)) == 1.5f);
  CHECK(hg::decode(f, hg::round_integral_bits(f, hg::encode(f, 1.5), hg::Rounding::kNearestEven)) == 2.0f);
  CHECK(hg::round_exact(f, false, 3, 0, false) == hg::encode(f, 3.0));
}
