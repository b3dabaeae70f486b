// The MX value types (halfgrad/precision/mx_types.h) against the OCP MX v1.0 definitions: every code of
// float4_e2m1, float6_e2m3 and float6_e3m2 decodes to its value from the element tables
// (section 5.3), E8M0 codes are 2^(code - 127) with 0xFF the NaN (5.4.1), MXINT8 codes are
// int8 / 64 (5.3.4); rounding into each, and agreement with mx_quantize's bytes (mx.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/mx.h"
#include "halfgrad/precision/mx_types.h"

namespace mx_types_test {

// The value of an element code from its fields (sign, e exponent bits, m mantissa bits, bias b;
// field 0 holds the subnormals; no specials in these formats).
double element_value(uint32_t c, int e, int m, int b) {
  const bool negative = (c >> (e + m)) != 0;
  const uint32_t field = (c >> m) & ((1u << e) - 1), mantissa = c & ((1u << m) - 1);
  const double magnitude = field == 0 ? std::ldexp(double(mantissa), 1 - b - m)
                                      : std::ldexp(double((1u << m) + mantissa), int(field) - b - m);
  return negative ? -magnitude : magnitude;
}

template <class T>
void check_every_code(int e, int m, int b) {
  for (uint32_t c = 0; c < (1u << (1 + e + m)); ++c) {
    const T x = T::from_bits(uint8_t(c));
    INFO("code " << c);
    CHECK(double(x) == element_value(c, e, m, b));
    CHECK(T(double(x)).bits() == c);
  }
}

}  // namespace mx_types_test

TEST_CASE("float4_e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives", "[precision][mx_types]") {
  using hg::float4_e2m1;
  const float magnitudes[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};  // OCP MX v1.0 5.3.3
  for (uint8_t c = 0; c < 8; ++c) {
    CHECK(float(float4_e2m1::from_bits(c)) == magnitudes[c]);
    CHECK(float(float4_e2m1::from_bits(uint8_t(c | 8))) == -magnitudes[c]);
  }
  mx_types_test::check_every_code<float4_e2m1>(2, 1, 1);
  CHECK(float4_e2m1(2.5f).bits() == 0x4);  // the tie of 2 (even) and 3: 2
  CHECK(float4_e2m1(7.0f).bits() == 0x7);  // beyond max: max, the format has no inf
  CHECK(float4_e2m1(std::numeric_limits<float>::infinity()).bits() == 0x7);
  CHECK_THROWS_AS(float4_e2m1(std::nanf("")), hg::Error);
  CHECK(float(float4_e2m1(4.0f) + float4_e2m1(4.0f)) == 6.0f);        // overflow: max
  CHECK_THROWS_AS(float4_e2m1(0.0f) / float4_e2m1(0.0f), hg::Error);  // no NaN to return
  using L = std::numeric_limits<float4_e2m1>;
  STATIC_REQUIRE(!L::has_quiet_NaN);
  STATIC_REQUIRE(!L::has_infinity);
  CHECK(float(L::max()) == 6.0f);
  CHECK(float(L::min()) == 1.0f);
  CHECK(float(L::denorm_min()) == 0.5f);
  CHECK(float(L::epsilon()) == 0.5f);  // 1.5 - 1
}

TEST_CASE("float6_e2m3 and float6_e3m2: every code, maxima 7.5 and 28", "[precision][mx_types]") {
  mx_types_test::check_every_code<hg::float6_e2m3>(2, 3, 1);
  mx_types_test::check_every_code<hg::float6_e3m2>(3, 2, 3);
  CHECK(float(std::numeric_limits<hg::float6_e2m3>::max()) == 7.5f);
  CHECK(float(std::numeric_limits<hg::float6_e3m2>::max()) == 28.0f);
  CHECK(float(std::numeric_limits<hg::float6_e2m3>::denorm_min()) == 0.125f);
  CHECK(float(std::numeric_limits<hg::float6_e3m2>::denorm_min()) == 0.0625f);
  CHECK(float(std::numeric_limits<hg::float6_e3m2>::epsilon()) == 0.25f);
}

TEST_CASE("float8_e8m0: codes are 2^(code - 127), values round to the nearest power of two", "[precision][mx_types]") {
  using hg::float8_e8m0;
  for (int c = 0; c < 255; ++c) {
    const float8_e8m0 x = float8_e8m0::from_bits(uint8_t(c));
    INFO("code " << c);
    CHECK(float(x) == std::ldexp(1.0f, c - 127));
    CHECK(float8_e8m0(double(x)).bits() == c);
    CHECK(hg::e8m0_decode(uint8_t(c)) == float(x));
  }
  CHECK(std::isnan(float(float8_e8m0::from_bits(0xFF))));
  CHECK(float8_e8m0().bits() == 127);     // 1: there is no zero
  CHECK(float8_e8m0(3.0).bits() == 129);  // the tie of 2 and 4: up
  CHECK(float8_e8m0(2.99).bits() == 128);
  CHECK(float8_e8m0(0.75).bits() == 127);  // the tie of 0.5 and 1: up
  CHECK(float8_e8m0(1e-40).bits() == 0);   // below 2^-127: 2^-127
  CHECK(float8_e8m0(std::ldexp(1.5, 127)).is_nan());
  CHECK(float8_e8m0(std::ldexp(1.49, 127)).bits() == 254);
  CHECK(float8_e8m0(std::numeric_limits<double>::infinity()).is_nan());
  CHECK_THROWS_AS(float8_e8m0(0.0), hg::Error);
  CHECK_THROWS_AS(float8_e8m0(-2.0), hg::Error);
  CHECK(float(std::numeric_limits<float8_e8m0>::max()) == std::ldexp(1.0f, 127));
  CHECK(float8_e8m0(4.0) > float8_e8m0(2.0));
}

TEST_CASE("mxint8: codes are int8 / 64, rounding saturates symmetrically", "[precision][mx_types]") {
  using hg::mxint8;
  for (int c = 0; c < 256; ++c) {
    INFO("code " << c);
    CHECK(float(mxint8::from_bits(uint8_t(c))) == float(int8_t(uint8_t(c))) / 64);
    if (c != 0x80) CHECK(mxint8(double(mxint8::from_bits(uint8_t(c)))).bits() == c);
  }
  CHECK(float(mxint8::from_bits(0x80)) == -2.0f);  // decodes, never produced:
  CHECK(mxint8(-2.0).bits() == 0x81);              // -127/64
  CHECK(mxint8(3.0).bits() == 0x7F);
  CHECK(mxint8(1.0 / 128).bits() == 0x00);  // the tie of 0 (even) and 1/64
  CHECK(mxint8(3.0 / 128).bits() == 0x02);  // the tie of 1/64 and 2/64 (even)
  CHECK(mxint8(1.0 / 128, {.mode = hg::Rounding::kNearestAway}).bits() == 0x01);
  CHECK(mxint8(-1.0 / 128, {.mode = hg::Rounding::kDown}).bits() == 0xFF);
  CHECK_THROWS_AS(mxint8(std::nan("")), hg::Error);
}

TEST_CASE("mx_quantize's bytes are the value types' bits", "[precision][mx_types]") {
  // amax 1.5: X = floor(log2 1.5) - emax = 0 - emax; for MXINT8 (emax 0) the scale is 2^0 and
  // the elements are the values themselves, for MXFP4 (emax 2) the scale is 2^-2.
  const std::vector<float> values = {1.5f, -0.5f, 0.046875f, 1.0f / 3};
  const hg::MxBlocks ints = hg::mx_quantize(hg::mx::mxint8, values);
  REQUIRE(ints.scale_exponent(0) == 0);
  CHECK(hg::float8_e8m0::from_bits(ints.scales[0]) == hg::float8_e8m0(1.0));
  for (size_t i = 0; i < values.size(); ++i) CHECK(ints.elements[i] == hg::mxint8(values[i]).bits());
  const hg::MxBlocks fp4 = hg::mx_quantize(hg::mx::mxfp4, values);
  REQUIRE(fp4.scale_exponent(0) == -2);
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK(fp4.elements[i] == hg::float4_e2m1(std::ldexp(values[i], 2)).bits());
  }
}
