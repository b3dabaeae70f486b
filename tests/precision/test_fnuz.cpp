// The fnuz fp8 presets (halfgrad/precision/float_format.h, Specials::kFnuz): e4m3fnuz and e5m2fnuz as
// LLVM APFloat (semFloat8E4M3FNUZ = {max exponent 7, min exponent -7, precision 4},
// semFloat8E5M2FNUZ = {15, -15, 3}, NaN encoding NegativeZero) and ml_dtypes define them. Every
// one of the 256 codes is checked against its value computed here from the definition (bias 8 or
// 16, subnormals at field 0, the single NaN 0x80, no -0, no inf), then the rounding and
// arithmetic rules that keep -0 and inf out: exact expected bits throughout.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/arithmetic.h"
#include "halfgrad/precision/float_format.h"

namespace fnuz_test {

// The value of code c in a fnuz format with e exponent bits, m mantissa bits and bias b, from
// the definition: sign bit, field, mantissa; field 0 holds the subnormals.
double value_of(uint32_t c, int e, int m, int b) {
  const bool negative = (c >> (e + m)) != 0;
  const uint32_t field = (c >> m) & ((1u << e) - 1), mantissa = c & ((1u << m) - 1);
  const double magnitude = field == 0 ? std::ldexp(double(mantissa), 1 - b - m)
                                      : std::ldexp(double((1u << m) + mantissa), int(field) - b - m);
  return negative ? -magnitude : magnitude;
}

void check_every_code(hg::FloatFormat f, int e, int m, int b) {
  for (uint32_t c = 0; c < 256; ++c) {
    INFO("code " << c);
    if (c == 0x80) {
      CHECK(std::isnan(hg::decode(f, c)));
      continue;
    }
    const double want = value_of(c, e, m, b);
    CHECK(double(hg::decode(f, c)) == want);
    CHECK(hg::encode(f, want) == c);  // every other code is a number, reached by rounding
  }
}

}  // namespace fnuz_test

TEST_CASE("e4m3fnuz: every code is its defined value, 0x80 the NaN", "[precision][fnuz]") {
  constexpr hg::FloatFormat f = hg::formats::e4m3fnuz;
  STATIC_REQUIRE(f.exponent_bias == 8);
  STATIC_REQUIRE(f.max_finite_bits() == 0x7F);
  STATIC_REQUIRE(f.nan_bits() == 0x80);
  STATIC_REQUIRE(!f.has_inf());
  CHECK(std::string(hg::format_name(f)) == "e4m3fnuz");
  CHECK(hg::decode(f, 0x7F) == 240.0f);                 // 1.875 * 2^7
  CHECK(hg::decode(f, 0x08) == std::ldexp(1.0f, -7));   // smallest normal
  CHECK(hg::decode(f, 0x01) == std::ldexp(1.0f, -10));  // smallest subnormal
  CHECK(hg::decode(f, 0x40) == 1.0f);
  CHECK(hg::decode(f, 0xFF) == -240.0f);
  fnuz_test::check_every_code(f, 4, 3, 8);
}

TEST_CASE("e5m2fnuz: every code is its defined value, 0x80 the NaN", "[precision][fnuz]") {
  constexpr hg::FloatFormat f = hg::formats::e5m2fnuz;
  STATIC_REQUIRE(f.exponent_bias == 16);
  STATIC_REQUIRE(f.max_finite_bits() == 0x7F);
  CHECK(std::string(hg::format_name(f)) == "e5m2fnuz");
  CHECK(hg::decode(f, 0x7F) == 57344.0f);               // 1.75 * 2^15
  CHECK(hg::decode(f, 0x04) == std::ldexp(1.0f, -15));  // smallest normal
  CHECK(hg::decode(f, 0x01) == std::ldexp(1.0f, -17));  // smallest subnormal
  CHECK(hg::decode(f, 0x40) == 1.0f);
  fnuz_test::check_every_code(f, 5, 2, 16);
}

TEST_CASE("fnuz rounding: no -0, and NaN where others have inf", "[precision][fnuz]") {
  constexpr hg::FloatFormat f = hg::formats::e4m3fnuz;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  CHECK(hg::encode(f, -0.0) == 0x00);
  CHECK(hg::encode(f, -1e-9) == 0x00);  // rounds to zero: +0, not the NaN
  CHECK(hg::encode(f, -1e-9, {.mode = hg::Rounding::kDown}) == 0x81);
  CHECK(hg::encode(f, -std::ldexp(1.0, -9), {.flush_subnormals = true}) == 0x00);  // a subnormal, flushed
  CHECK(hg::encode(f, kNan) == 0x80);
  CHECK(hg::encode(f, -kNan) == 0x80);
  CHECK(hg::encode(f, kInf) == 0x80);
  CHECK(hg::encode(f, -kInf) == 0x80);
  CHECK(hg::encode(f, kInf, {.saturate = true}) == 0x7F);
  CHECK(hg::encode(f, -kInf, {.saturate = true}) == 0xFF);
  CHECK(hg::encode(f, 1000.0) == 0x80);
  CHECK(hg::encode(f, 1000.0, {.saturate = true}) == 0x7F);
  // 247 lies below the midpoint 248 of 240 and 256: 240. At 248 nearest-even picks 256 (240's
  // mantissa 111 is odd), which is beyond max: overflow, the NaN.
  CHECK(hg::encode(f, 247.0) == 0x7F);
  CHECK(hg::encode(f, 248.0) == 0x80);
  CHECK(hg::encode(f, 248.0, {.mode = hg::Rounding::kTowardZero}) == 0x7F);
}

TEST_CASE("fnuz arithmetic: zero results are +0, invalid and overflowing ones the NaN", "[precision][fnuz]") {
  constexpr hg::FloatFormat f = hg::formats::e4m3fnuz;
  const uint32_t one = 0x40, minus_one = 0xC0, zero = 0x00, nan = 0x80;
  CHECK(hg::sub_bits(f, one, one) == zero);
  CHECK(hg::sub_bits(f, one, one, {.mode = hg::Rounding::kDown}) == zero);  // -0 elsewhere
  CHECK(hg::add_bits(f, one, minus_one) == zero);
  CHECK(hg::mul_bits(f, minus_one, zero) == zero);  // -0 elsewhere
  CHECK(hg::div_bits(f, zero, minus_one) == zero);
  CHECK(hg::sub_bits(f, one, zero) == one);  // subtracting 0 must not flip 0 into the NaN
  CHECK(hg::neg_bits(f, zero) == zero);
  CHECK(hg::neg_bits(f, one) == minus_one);
  CHECK(hg::div_bits(f, zero, zero) == nan);
  CHECK(hg::div_bits(f, one, zero) == nan);  // inf has no encoding
  CHECK(hg::add_bits(f, 0x7F, 0x7F) == nan);
  CHECK(hg::add_bits(f, 0x7F, 0x7F, {.saturate = true}) == 0x7F);
  CHECK(hg::sqrt_bits(f, minus_one) == nan);
  CHECK(hg::add_bits(f, nan, one) == nan);
  CHECK(hg::mul_bits(f, one, one) == one);
  // Bit stepping passes through +0 and ends at the NaN beyond max.
  CHECK(hg::next_bits(f, zero, false) == 0x81);
  CHECK(hg::next_bits(f, 0x81, true) == zero);
  CHECK(hg::next_bits(f, 0x7F, true) == nan);
  CHECK(hg::round_integral_bits(f, hg::encode(f, -0.5), hg::Rounding::kUp) == zero);  // ceil(-0.5)
  CHECK(hg::decode(f, hg::round_integral_bits(f, hg::encode(f, -0.5), hg::Rounding::kDown)) == -1.0f);
}
