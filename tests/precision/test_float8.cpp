// The OCP 8-bit formats (halfgrad/precision/float8.h): all 256 patterns of e4m3 and e5m2 decode as the
// OCP formula written out here and round-trip; the special values; conversion boundaries
// derived by hand for round-to-nearest-even, the directed modes and saturation, and the OCP
// spec's saturating conversion (Table 3, saturate_inf).
// Random conversions against the exact oracle are in test_float_format.cpp.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "halfgrad/precision/float8.h"
#include "halfgrad/precision/half.h"
#include "tests/precision/oracles.h"
#include "tests/float_specials.h"

namespace {

using hg::float8_e4m3;
using hg::float8_e5m2;
using hg::precision::Rounding;
using hg::precision::RoundingOptions;
using hg::precision::oracle::hex32;
using hg::precision::oracle::hex8;
using hg::precision::oracle::hexfloat;

using hg::testing::kInf;

// OCP FP8 v1.0, section 4: value = (-1)^S * 2^(E - bias) * (1 + M / 2^m) for E > 0 and
// (-1)^S * 2^(1 - bias) * (M / 2^m) for E = 0. e4m3 (bias 7): S.1111.111 is NaN, no inf;
// e5m2 (bias 15): E = 31 is inf (M = 0) or NaN, as in IEEE 754.
double ocp_value(uint32_t bits, int exponent_bits, int mantissa_bits, bool ieee_specials) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int e = int(bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int m = int(bits) & ((1 << mantissa_bits) - 1);
  const double sign = (bits & 0x80) != 0 ? -1.0 : 1.0;
  const int e_max = (1 << exponent_bits) - 1;
  if (ieee_specials && e == e_max) return m == 0 ? sign * kInf : std::nan("");
  if (!ieee_specials && e == e_max && m == (1 << mantissa_bits) - 1) return std::nan("");
  const double scale = std::ldexp(1.0, -mantissa_bits);
  if (e == 0) return sign * std::ldexp(1.0, 1 - bias) * (m * scale);
  return sign * std::ldexp(1.0, e - bias) * (1 + m * scale);
}

template <class T>
uint32_t bits_of(double x, RoundingOptions options = {}) {
  return T(x, options).bits();
}

}  // namespace

TEST_CASE("e4m3: all 256 patterns decode as the OCP formula and round-trip", "[precision][float8]") {
  int nans = 0, wrong = 0;
  double previous = -1;  // positive finite values must increase with the bit pattern
  for (uint32_t bits = 0; bits < 256; ++bits) {
    const float8_e4m3 v = float8_e4m3::from_bits(uint8_t(bits));
    const double expected = ocp_value(bits, 4, 3, false);
    const float f = v.to_float();
    INFO("e4m3 " << hex8(bits) << " decodes to " << hexfloat(f));
    if (std::isnan(expected)) {
      ++nans;
      CHECK(hex32(std::bit_cast<uint32_t>(f)) == hex32((bits & 0x80) << 24 | 0x7FC00000));
      CHECK(hex8(float8_e4m3(f).bits()) == hex8(bits));  // the NaN of that sign
      continue;
    }
    wrong += double(f) != expected || std::signbit(f) != (bits >= 0x80);
    CHECK(double(f) == expected);
    CHECK(hex8(float8_e4m3(f).bits()) == hex8(bits));
    if (bits < 0x80) {
      CHECK(double(f) > previous);
      previous = f;
    }
  }
  CHECK(wrong == 0);
  CHECK(nans == 2);  // 0x7F and 0xFF only
  CHECK(previous == 448.0);
}

// e5m2's signaling NaNs (0x7D, 0xFD: quiet bit 0x02 clear) come back quiet: bits | 0x02.
TEST_CASE("e5m2: all 256 patterns decode as the OCP formula and round-trip", "[precision][float8]") {
  int nans = 0, infs = 0;
  double previous = -1;
  for (uint32_t bits = 0; bits < 256; ++bits) {
    const float8_e5m2 v = float8_e5m2::from_bits(uint8_t(bits));
    const double expected = ocp_value(bits, 5, 2, true);
    const float f = v.to_float();
    INFO("e5m2 " << hex8(bits) << " decodes to " << hexfloat(f));
    // e5m2 is the top byte of an f16: an independent second reading of the same bits.
    const float as_f16 = hg::half::from_bits(uint16_t(bits << 8)).to_float();
    if (std::isnan(expected)) {  // quiet float NaN, sign and the 2 payload bits kept
      ++nans;
      CHECK(hex32(std::bit_cast<uint32_t>(f)) == hex32((bits & 0x80) << 24 | 0x7FC00000 | (bits & 0x03) << 21));
      CHECK(hex8(float8_e5m2(f).bits()) == hex8(bits | 0x02));
      continue;
    }
    infs += std::isinf(expected);
    CHECK(double(f) == expected);
    CHECK(std::signbit(f) == (bits >= 0x80));
    CHECK(hex32(std::bit_cast<uint32_t>(f)) == hex32(std::bit_cast<uint32_t>(as_f16)));
    CHECK(hex8(float8_e5m2(f).bits()) == hex8(bits));
    if (bits < 0x7C) {
      CHECK(double(f) > previous);
      previous = f;
    }
  }
  CHECK(nans == 6);  // S.11111.{01,10,11}
  CHECK(infs == 2);
  CHECK(previous == 57344.0);
}

TEST_CASE("fp8 special values", "[precision][float8]") {
  CHECK(float8_e4m3::from_bits(0x7E).to_double() == 448.0);
  CHECK(float8_e4m3::from_bits(0x01).to_double() == 0x1p-9);  // smallest subnormal
  CHECK(float8_e4m3::from_bits(0x08).to_double() == 0x1p-6);  // smallest normal
  CHECK(float8_e4m3::from_bits(0x78).to_double() == 256.0);   // S.1111.000 is finite in e4m3
  CHECK(float8_e4m3::from_bits(0x7F).is_nan());
  CHECK(float8_e4m3::from_bits(0xFF).is_nan());
  CHECK_FALSE(float8_e4m3::from_bits(0x7E).is_inf());
  CHECK(float8_e5m2::from_bits(0x7B).to_double() == 57344.0);
  CHECK(float8_e5m2::from_bits(0x7C).to_double() == kInf);
  CHECK(float8_e5m2::from_bits(0xFC).to_double() == -kInf);
  CHECK(float8_e5m2::from_bits(0x01).to_double() == 0x1p-16);
  CHECK(float8_e5m2::from_bits(0x04).to_double() == 0x1p-14);
  CHECK(hex8(bits_of<float8_e4m3>(std::nan(""))) == hex8(0x7F));
  CHECK(hex8(bits_of<float8_e4m3>(-std::nan(""))) == hex8(0xFF));
  CHECK(hex8(bits_of<float8_e5m2>(std::nan(""))) == hex8(0x7E));
  CHECK(hex8(bits_of<float8_e5m2>(-std::nan(""))) == hex8(0xFE));
  CHECK(hex8(bits_of<float8_e4m3>(-0.0)) == hex8(0x80));
}

// e4m3's top binade [256, 512) has spacing 2^(8-3) = 32: ... 416, 448 (0x7E, mantissa 110), and
// 480 would be S.1111.111, the NaN. So 448 + half ulp = 464 is where overflow starts. 464 itself
// is a tie between 448 and 480, and the tie goes to the even mantissa, 448's 110: 464 -> 448.
// This is not an opinion of ours: NVIDIA's reference conversion (cuda_fp8.hpp,
// __nv_cvt_double_to_fp8) overflows only for |x| > FP8_OVERFLOW_THRESHOLD = "maxnorm + 1/2ulp"
// = 464 and rounds 464 itself to nearest even, giving 0x7E; PyTorch's
// c10::detail::fp8e4m3fn_from_fp32_value agrees (NaN from 480 up, ties-to-even below, so 464 ->
// 0x7E and (464, 480) -> 0x7F). Anything above 464 overflows: NaN without saturation, 448 with.
// Near zero: the smallest subnormal is 2^-6 * 2^-3 = 2^-9, spacing 2^-9 up to 2^-6.
TEST_CASE("e4m3 conversion boundaries", "[precision][float8]") {
  const RoundingOptions sat{.saturate = true};
  CHECK(hex8(bits_of<float8_e4m3>(448.0)) == hex8(0x7E));
  CHECK(hex8(bits_of<float8_e4m3>(463.99)) == hex8(0x7E));
  CHECK(hex8(bits_of<float8_e4m3>(464.0)) == hex8(0x7E));  // the tie: see above
  CHECK(hex8(bits_of<float8_e4m3>(464.0, sat)) == hex8(0x7E));
  CHECK(hex8(bits_of<float8_e4m3>(464.0 + 0x1p-40)) == hex8(0x7F));  // beyond: NaN
  CHECK(hex8(bits_of<float8_e4m3>(464.0 + 0x1p-40, sat)) == hex8(0x7E));
  CHECK(hex8(bits_of<float8_e4m3>(-464.0 - 0x1p-40)) == hex8(0xFF));
  CHECK(hex8(bits_of<float8_e4m3>(-464.0 - 0x1p-40, sat)) == hex8(0xFE));
  CHECK(hex8(bits_of<float8_e4m3>(480.0)) == hex8(0x7F));
  CHECK(hex8(bits_of<float8_e4m3>(1e6)) == hex8(0x7F));
  CHECK(hex8(bits_of<float8_e4m3>(kInf)) == hex8(0x7F));  // no inf: NaN
  CHECK(hex8(bits_of<float8_e4m3>(-kInf)) == hex8(0xFF));
  CHECK(hex8(bits_of<float8_e4m3>(kInf, sat)) == hex8(0x7E));  // no inf to keep: max
  CHECK(hex8(bits_of<float8_e4m3>(-kInf, sat)) == hex8(0xFE));
  // Directed overflow: toward zero and the mode pointing back toward zero stop at max.
  CHECK(hex8(bits_of<float8_e4m3>(1e6, {.mode = Rounding::kTowardZero})) == hex8(0x7E));
  CHECK(hex8(bits_of<float8_e4m3>(1e6, {.mode = Rounding::kDown})) == hex8(0x7E));
  CHECK(hex8(bits_of<float8_e4m3>(449.0, {.mode = Rounding::kUp})) == hex8(0x7F));
  CHECK(hex8(bits_of<float8_e4m3>(-1e6, {.mode = Rounding::kUp})) == hex8(0xFE));
  CHECK(hex8(bits_of<float8_e4m3>(-449.0, {.mode = Rounding::kDown})) == hex8(0xFF));
  // Ties in [1, 2) (spacing 2^-3): 1.0625 between 1.0 (0x38, even) and 1.125; 1.1875 between
  // 1.125 (0x39, odd) and 1.25 (0x3A).
  CHECK(hex8(bits_of<float8_e4m3>(1.0625)) == hex8(0x38));
  CHECK(hex8(bits_of<float8_e4m3>(1.1875)) == hex8(0x3A));
  // Near zero.
  CHECK(hex8(bits_of<float8_e4m3>(0x1p-10)) == hex8(0x00));  // 0.0009765625: tie, 0 even
  CHECK(hex8(bits_of<float8_e4m3>(0x1p-10 + 0x1p-30)) == hex8(0x01));
  CHECK(hex8(bits_of<float8_e4m3>(-0x1p-10)) == hex8(0x80));
  CHECK(hex8(bits_of<float8_e4m3>(3 * 0x1p-11)) == hex8(0x01));   // 0.75 units
  CHECK(hex8(bits_of<float8_e4m3>(3 * 0x1p-10)) == hex8(0x02));   // 1.5 units: tie, 2 even
  CHECK(hex8(bits_of<float8_e4m3>(7.5 * 0x1p-9)) == hex8(0x08));  // into the smallest normal
  CHECK(hex8(bits_of<float8_e4m3>(0x1p-10, {.mode = Rounding::kUp})) == hex8(0x01));
  CHECK(hex8(bits_of<float8_e4m3>(0x1p-8, {.flush_subnormals = true})) == hex8(0x00));
}

// e5m2's top binade [2^15, 2^16) has spacing 2^(15-2) = 8192: 49152, 57344 (0x7B, mantissa 11,
// odd). max + half ulp = 61440 is a tie whose even neighbour is 65536, past max: inf.
// The smallest subnormal is 2^-14 * 2^-2 = 2^-16.
TEST_CASE("e5m2 conversion boundaries", "[precision][float8]") {
  const RoundingOptions sat{.saturate = true};
  CHECK(hex8(bits_of<float8_e5m2>(57344.0)) == hex8(0x7B));
  CHECK(hex8(bits_of<float8_e5m2>(61439.0)) == hex8(0x7B));
  CHECK(hex8(bits_of<float8_e5m2>(61440.0)) == hex8(0x7C));
  CHECK(hex8(bits_of<float8_e5m2>(-61440.0)) == hex8(0xFC));
  CHECK(hex8(bits_of<float8_e5m2>(61440.0, sat)) == hex8(0x7B));
  CHECK(hex8(bits_of<float8_e5m2>(1e6, sat)) == hex8(0x7B));
  CHECK(hex8(bits_of<float8_e5m2>(kInf, sat)) == hex8(0x7C));  // inf stays inf
  CHECK(hex8(bits_of<float8_e5m2>(1e6, {.mode = Rounding::kTowardZero})) == hex8(0x7B));
  CHECK(hex8(bits_of<float8_e5m2>(57345.0, {.mode = Rounding::kUp})) == hex8(0x7C));
  CHECK(hex8(bits_of<float8_e5m2>(-1e6, {.mode = Rounding::kUp})) == hex8(0xFB));
  // Ties in [1, 2) (spacing 2^-2): 1.125 -> 1.0 (0x3C, even); 1.375 -> 1.5 (0x3E).
  CHECK(hex8(bits_of<float8_e5m2>(1.125)) == hex8(0x3C));
  CHECK(hex8(bits_of<float8_e5m2>(1.375)) == hex8(0x3E));
  CHECK(hex8(bits_of<float8_e5m2>(0x1p-17)) == hex8(0x00));  // half the smallest subnormal
  CHECK(hex8(bits_of<float8_e5m2>(0x1p-17 + 0x1p-40)) == hex8(0x01));
  CHECK(hex8(bits_of<float8_e5m2>(3 * 0x1p-17)) == hex8(0x02));    // 1.5 units: tie, 2 even
  CHECK(hex8(bits_of<float8_e5m2>(3.5 * 0x1p-16)) == hex8(0x04));  // into the smallest normal
}

// OFP8 v1.0 5.2.1 Table 3 (as transcribed by SiFive's Zvfofp8min and the microfloat crate), row by row:
//   source         E5M2 non-sat  E5M2 sat   E4M3 non-sat  E4M3 sat
//   NaN            NaN           NaN        NaN           NaN
//   +-Inf          +-Inf         +-57344    NaN           +-448
//   above max      +-Inf         +-57344    NaN           +-448
// "sat" is {.saturate = true, .saturate_inf = true}; saturate alone keeps e5m2's inf (the named
// earlier behaviour). The vector kernels are held to the same by test_convert.cpp's option sweep.
TEST_CASE("OCP saturating conversion: Table 3 with saturate_inf, inf kept by saturate alone", "[precision][float8]") {
  const RoundingOptions sat{.saturate = true, .saturate_inf = true};
  const RoundingOptions finite_only{.saturate = true};
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const double sign : {1.0, -1.0}) {
    const uint32_t s = sign < 0 ? 0x80 : 0;
    INFO("sign " << sign);
    CHECK(float8_e5m2(sign * nan).is_nan());
    CHECK(float8_e5m2(sign * nan, sat).is_nan());
    CHECK(float8_e4m3(sign * nan).is_nan());
    CHECK(float8_e4m3(sign * nan, sat).is_nan());
    CHECK(hex8(bits_of<float8_e5m2>(sign * inf)) == hex8(s | 0x7C));
    CHECK(hex8(bits_of<float8_e5m2>(sign * inf, sat)) == hex8(s | 0x7B));
    CHECK(hex8(bits_of<float8_e5m2>(sign * inf, finite_only)) == hex8(s | 0x7C));
    CHECK(hex8(bits_of<float8_e4m3>(sign * inf)) == hex8(s | 0x7F));
    CHECK(hex8(bits_of<float8_e4m3>(sign * inf, sat)) == hex8(s | 0x7E));
    CHECK(hex8(bits_of<float8_e4m3>(sign * inf, finite_only)) == hex8(s | 0x7E));
    // Above max: e5m2 overflows from 61440 (57344 + half its ulp 8192, a tie to even: inf),
    // e4m3 from 464 (448 + 16: a tie to even 448; 465 overflows).
    CHECK(hex8(bits_of<float8_e5m2>(sign * 61440)) == hex8(s | 0x7C));
    CHECK(hex8(bits_of<float8_e5m2>(sign * 61440, sat)) == hex8(s | 0x7B));
    CHECK(hex8(bits_of<float8_e4m3>(sign * 464)) == hex8(s | 0x7E));
    CHECK(hex8(bits_of<float8_e4m3>(sign * 465)) == hex8(s | 0x7F));
    CHECK(hex8(bits_of<float8_e4m3>(sign * 465, sat)) == hex8(s | 0x7E));
    // saturate_inf alone does nothing.
    CHECK(hex8(bits_of<float8_e5m2>(sign * inf, {.saturate_inf = true})) == hex8(s | 0x7C));
  }
  // Arithmetic's infinite results are fitted the same way.
  const auto e5_inf = std::numeric_limits<float8_e5m2>::infinity();
  CHECK(hex8(hg::add(e5_inf, float8_e5m2(1), sat).bits()) == hex8(0x7B));
  CHECK(hex8(hg::add(e5_inf, float8_e5m2(1), finite_only).bits()) == hex8(0x7C));
  CHECK(hex8(hg::div(float8_e5m2(-1), float8_e5m2(0), sat).bits()) == hex8(0xFB));
}
