// halfgrad/precision/testing.h (ulp_distance, all_values, finite_values) and halfgrad/precision/catch_matchers.h
// (EqualsBits, WithinUlps): exact distances, exact counts per format, the matchers' verdicts
// and messages.
#include "halfgrad/precision/testing.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/catch_matchers.h"
#include "halfgrad/precision/finfo.h"
#include "halfgrad/precision/float8.h"
#include "halfgrad/precision/half.h"

namespace hg::precision {
namespace {

static_assert(ulp_distance(half::from_bits(0x3c00), half::from_bits(0x3c01)) == 1);  // constexpr

TEST_CASE("ulp_distance counts representable steps, exact values per format", "[precision][testing]") {
  const half one(1);
  CHECK(ulp_distance(one, half::from_bits(0x3c01)) == 1);
  CHECK(ulp_distance(half::from_bits(0x3c01), one) == 1);  // symmetric
  CHECK(ulp_distance(one, one) == 0);
  CHECK(ulp_distance(half(-0.0), half(0.0)) == 0);
  CHECK(ulp_distance(half::from_bits(0x8001), half::from_bits(0x0001)) == 2);  // -+min subnormal
  CHECK(ulp_distance(half(0.0), half::from_bits(0x0001)) == 1);
  CHECK(ulp_distance(std::numeric_limits<half>::max(), std::numeric_limits<half>::infinity()) == 1);
  CHECK(ulp_distance(-std::numeric_limits<half>::infinity(), std::numeric_limits<half>::infinity()) == 2 * 0x7c00);
  CHECK(ulp_distance(half(-1), one) == 2 * 0x3c00);  // across zero: both sides' steps
  CHECK(ulp_distance(one, half(2)) == 1024);         // one binade: 2^10 values
  CHECK(ulp_distance(bfloat16(1), bfloat16(2)) == 128);
  CHECK(ulp_distance(float8_e5m2(1), float8_e5m2(2)) == 4);
  CHECK(ulp_distance(float8_e5m2(57344), std::numeric_limits<float8_e5m2>::infinity()) == 1);
  // e4m3 has no inf: 448 (0x7e) is the last value before the NaN 0x7f.
  CHECK(ulp_distance(float8_e4m3(448), float8_e4m3(416)) == 1);
  CHECK(ulp_distance(float8_e4m3(-448), float8_e4m3(448)) == 2 * 0x7e);
}

TEST_CASE("ulp_distance of a NaN throws hg::Error", "[precision][testing]") {
  CHECK_THROWS_AS(ulp_distance(std::numeric_limits<half>::quiet_NaN(), half(1)), Error);
  CHECK_THROWS_AS(ulp_distance(half(1), -std::numeric_limits<half>::quiet_NaN()), Error);
  CHECK_THROWS_AS(ulp_distance(float8_e4m3::from_bits(0xff), float8_e4m3(0)), Error);
}

TEST_CASE("ulp_distance is 1 between neighbours in value order, for every half", "[precision][testing]") {
  // The positive finite halves in bit order increase in value, one ulp per step, and each is
  // 2 * bits from its negative.
  int64_t bad = 0;
  half previous(0.0);
  for (const half x : finite_values<half>()) {
    if (x.sign_bit() || x.bits() == 0) continue;
    const bool ok = x > previous && ulp_distance(previous, x) == 1 && ulp_distance(-x, x) == 2 * int64_t(x.bits());
    bad += ok ? 0 : 1;
    previous = x;
  }
  CHECK(bad == 0);
  CHECK(previous.bits() == std::numeric_limits<half>::max().bits());
}

TEST_CASE("all_values visits every bit pattern once in increasing order", "[precision][testing]") {
  auto check = [](auto range, int64_t expected_count) {
    int64_t count = 0;
    uint32_t next_bits = 0;
    for (const auto x : range) {
      count += x.bits() == next_bits ? 1 : 0;  // counts only patterns in order
      ++next_bits;
    }
    CHECK(count == expected_count);
    CHECK(int64_t(next_bits) == expected_count);
  };
  check(all_values<half>(), 65536);
  check(all_values<bfloat16>(), 65536);
  check(all_values<float8_e4m3>(), 256);
  check(all_values<float8_e5m2>(), 256);
  CHECK(std::ranges::size(all_values<half>()) == 65536);
}

TEST_CASE("all_values holds the infs and NaNs of each format, finite_values the rest", "[precision][testing]") {
  auto count = [](auto range, auto predicate) {
    int64_t n = 0;
    for (const auto x : range) n += predicate(x) ? 1 : 0;
    return n;
  };
  auto is_inf = [](auto x) { return isinf(x); };
  auto is_nan = [](auto x) { return isnan(x); };
  auto any = [](auto) { return true; };
  // IEEE-like formats: 2 infs and 2 * (2^mantissa_bits - 1) NaNs; e4m3: no inf, 2 NaNs.
  CHECK(count(all_values<half>(), is_inf) == 2);
  CHECK(count(all_values<half>(), is_nan) == 2046);
  CHECK(count(finite_values<half>(), any) == 65536 - 2048);
  CHECK(count(all_values<bfloat16>(), is_inf) == 2);
  CHECK(count(all_values<bfloat16>(), is_nan) == 254);
  CHECK(count(finite_values<bfloat16>(), any) == 65536 - 256);
  CHECK(count(all_values<float8_e5m2>(), is_inf) == 2);
  CHECK(count(all_values<float8_e5m2>(), is_nan) == 6);
  CHECK(count(finite_values<float8_e5m2>(), any) == 248);
  CHECK(count(all_values<float8_e4m3>(), is_inf) == 0);
  CHECK(count(all_values<float8_e4m3>(), is_nan) == 2);
  CHECK(count(finite_values<float8_e4m3>(), any) == 254);
  // The largest finite value is finfo's max, and it is met exactly twice (+-max).
  CHECK(count(finite_values<float8_e4m3>(),
              [](auto x) { return std::fabs(x.to_double()) == finfo<float8_e4m3>().max; }) == 2);
}

TEST_CASE("EqualsBits matches the bit pattern and prints both values with their bits", "[precision][testing]") {
  const auto matcher = EqualsBits(half(1));
  CHECK(matcher.describe() == "has the bits of 1 (0x3c00 = 0|01111|0000000000)");
  CHECK(matcher.match(half(1)));
  CHECK_FALSE(matcher.match(half::from_bits(0x3c01)));
  CHECK(matcher.describe() ==
        "has the bits of 1 (0x3c00 = 0|01111|0000000000); got 1.00097656 (0x3c01 = 0|01111|0000000001)");
  CHECK_FALSE(EqualsBits(half(0.0)).match(half(-0.0)));  // equal values, different bits
  const half nan = std::numeric_limits<half>::quiet_NaN();
  CHECK(EqualsBits(nan).match(nan));
  CHECK_FALSE(EqualsBits(nan).match(-nan));
  CHECK(EqualsBits(float8_e4m3(448)).match(float8_e4m3::from_bits(0x7e)));
  CHECK_THAT(bfloat16(1) + bfloat16(1), EqualsBits(bfloat16(2)));
}

TEST_CASE("WithinUlps matches up to n steps and prints the distance", "[precision][testing]") {
  const auto matcher = WithinUlps(half(1), 1);
  CHECK(matcher.match(half::from_bits(0x3bff)));
  CHECK(matcher.match(half::from_bits(0x3c01)));
  CHECK_FALSE(matcher.match(half::from_bits(0x3c02)));
  CHECK(matcher.describe() ==
        "is within 1 ulps of 1 (0x3c00 = 0|01111|0000000000); got 1.00195312 (0x3c02 = 0|01111|0000000010), "
        "2 ulps away");
  CHECK(WithinUlps(half(0.0), 0).match(half(-0.0)));
  CHECK(WithinUlps(std::numeric_limits<half>::max(), 1).match(std::numeric_limits<half>::infinity()));
  const half nan = std::numeric_limits<half>::quiet_NaN();
  const auto nan_matcher = WithinUlps(half(1), 100);
  CHECK_FALSE(nan_matcher.match(nan));  // no distance: never within
  CHECK(nan_matcher.describe() ==
        "is within 100 ulps of 1 (0x3c00 = 0|01111|0000000000); got nan (0x7e00 = 0|11111|1000000000)");
  CHECK_FALSE(WithinUlps(nan, 100).match(nan));
  CHECK_THAT(float8_e5m2(1.1), WithinUlps(float8_e5m2(1), 1));
}

}  // namespace
}  // namespace hg::precision
