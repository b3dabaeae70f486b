// A user's numerics test on halfgrad::numerics: the installed headers under halfgrad/, the
// Catch2 matchers (v2 or v3), and functions from the library file (MX quantization).
#if __has_include(<catch2/catch_version_macros.hpp>)  // Catch2 v3
#include <catch2/catch_test_macros.hpp>
#else  // Catch2 v2: this file is the test program's main as well
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif

#include <halfgrad/precision/bfloat16.h>
#include <halfgrad/precision/catch_matchers.h>
#include <halfgrad/precision/float8.h>
#include <halfgrad/precision/half.h>
#include <halfgrad/precision/mx.h>
#include <halfgrad/precision/testing.h>
#include <halfgrad/version.h>

#include <vector>

TEST_CASE("halfgrad's version is the one asked for") {
  STATIC_REQUIRE(HALFGRAD_VERSION_MAJOR == 0);
  STATIC_REQUIRE(HALFGRAD_VERSION_MINOR >= 3);
}

TEST_CASE("0.1 rounds to the nearest half, bfloat16 and e4m3") {
  // 0.1 = 0x1.999999...p-4; half keeps 10 fraction bits: 0x1.998p-4 = 0x2E66 (0.0999755859375).
  CHECK_THAT(hg::half(0.1), hg::EqualsBits(hg::half::from_bits(0x2E66)));
  // bfloat16 keeps 7: 0x1.9ap-4 (the next bit is 1 and more follow: up) = 0x3DCD.
  CHECK_THAT(hg::bfloat16(0.1), hg::EqualsBits(hg::bfloat16::from_bits(0x3DCD)));
  // e4m3 keeps 3: 0x1.ap-4 = exponent field 7 - 4 = 3, mantissa 0b101: 0x1D.
  CHECK_THAT(hg::float8_e4m3(0.1), hg::EqualsBits(hg::float8_e4m3::from_bits(0x1D)));
  CHECK_THAT(hg::half(0.1) + hg::half(0.2), hg::WithinUlps(hg::half(0.3), 1));
}

TEST_CASE("every finite half survives a round trip through float") {
  for (const hg::half x : hg::finite_values<hg::half>()) {
    REQUIRE(hg::half(float(x)).bits() == x.bits());
  }
}

TEST_CASE("an MXFP4 block keeps powers of two of its scale") {
  // amax 8 = 2^3, E2M1's emax 2: X = 1 and elements 8/2 = 4, 1/2 = 0.5, 3/2 = 1.5: all exact.
  const std::vector<float> values = {8.0f, 1.0f, -3.0f};
  const hg::MxBlocks blocks = hg::mx_quantize(hg::mx::mxfp4, values);
  REQUIRE(blocks.scale_exponent(0) == 1);
  std::vector<float> back(values.size());
  hg::mx_dequantize(blocks, back);
  CHECK(back == values);
}
