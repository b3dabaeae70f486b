// OCP MX block formats (halfgrad/precision/mx.h): hand-computed blocks (the derivation of every expected
// scale and element code is in the comments), the two scale rules on blocks where they must
// differ and where they must agree, NaN/inf/zero/partial blocks, E8M0, exact round trips of
// values a block can represent, and the argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/mx.h"
#include "tests/precision/oracles.h"

namespace {

using hg::precision::MxBlocks;
using hg::precision::MxFormat;
using hg::precision::MxOptions;
using hg::precision::MxScaleRule;
using hg::precision::Rounding;
using hg::precision::oracle::hex8;

constexpr MxOptions kRoundUp{.scale_rule = MxScaleRule::kRoundUp};

std::vector<float> dequantized(const MxBlocks& blocks) {
  std::vector<float> out(blocks.size());
  hg::mx_dequantize(blocks, out);
  return out;
}

// A block of 32: `head` followed by zeros.
std::vector<float> block_of(std::vector<float> head) {
  head.resize(32, 0.0f);
  return head;
}

}  // namespace

TEST_CASE("E8M0: code c is 2^(c - 127), 0xFF is NaN", "[precision][mx]") {
  CHECK(hg::e8m0_decode(0) == 0x1p-127f);  // a float subnormal, exact
  CHECK(hg::e8m0_decode(127) == 1.0f);
  CHECK(hg::e8m0_decode(128) == 2.0f);
  CHECK(hg::e8m0_decode(254) == 0x1p127f);
  CHECK(std::isnan(hg::e8m0_decode(hg::kE8M0Nan)));
}

TEST_CASE("MXFP4: a hand-computed block with amax 6", "[precision][mx]") {
  // amax = 6: X = floor(log2 6) - emax(e2m1) = 2 - 2 = 0, scale code 127. e2m1 codes 0..7 are
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6 (sign 0x8). Nearest-even ties go to the even code:
  //   0.25 (0|0.5) -> 0; 0.75 (0.5|1) -> code 2 = 1; 2.5 (2|3) -> code 4 = 2; 5 (4|6) -> code 6 = 4;
  //   -1.25 (1|1.5) -> 0xA = -1; 1.75 (1.5|2) -> code 4 = 2; 3.5 (3|4) -> code 6 = 4;
  //   0.1 < 0.25 -> 0; -0.3 > 0.25 in magnitude -> 0x9 = -0.5.
  const std::vector<float> in = block_of({6, -6, 0.5f, 0.25f, 0.75f, 2.5f, 5, -1.25f, 1.75f, 3.5f, 0.1f, -0.3f});
  const MxBlocks q = hg::mx_quantize(hg::mx::mxfp4, in);
  REQUIRE(q.scales.size() == 1);
  CHECK(hex8(q.scales[0]) == hex8(127));
  const uint8_t codes[12] = {0x7, 0xF, 0x1, 0x0, 0x2, 0x4, 0x6, 0xA, 0x4, 0x6, 0x0, 0x9};
  for (int i = 0; i < 12; ++i) CHECK(hex8(q.elements[size_t(i)]) == hex8(codes[i]));
  for (size_t i = 12; i < 32; ++i) CHECK(q.elements[i] == 0);
  const std::vector<float> out = dequantized(q);
  const float values[12] = {6, -6, 0.5f, 0, 1, 2, 4, -1, 2, 4, 0, -0.5f};
  for (int i = 0; i < 12; ++i) CHECK(out[size_t(i)] == values[i]);

  // Ties away from zero (microxcaling's default "nearest"): 0.25 -> 0.5, 2.5 -> 3, 5 -> 6.
  const MxBlocks away = hg::mx_quantize(hg::mx::mxfp4, in, {.rounding = Rounding::kNearestAway});
  CHECK(hex8(away.elements[3]) == hex8(0x1));
  CHECK(hex8(away.elements[5]) == hex8(0x5));
  CHECK(hex8(away.elements[6]) == hex8(0x7));
  // amax = 6 is e2m1's max: the round-up rule picks the same X (6 / 2^0 <= 6), so the same bits.
  const MxBlocks up = hg::mx_quantize(hg::mx::mxfp4, in, kRoundUp);
  CHECK(up.scales == q.scales);
  CHECK(up.elements == q.elements);
}

TEST_CASE("MXFP8 e4m3: amax 1000 clamps under the OCP rule and not under round-up", "[precision][mx]") {
  // OCP: X = floor(log2 1000) - emax(e4m3) = 9 - 8 = 1 (code 128). 1000 / 2 = 500 > 448: clamped
  // to 448 (0x7E), decoding to 896. 3 / 2 = 1.5 = 1.100b * 2^0: field 7, mantissa 100 -> 0x3C.
  // -0.01 / 2 = -0.005 = 2.56 * 2^-9 (e4m3's subnormal quantum) -> 3 quanta: 0x83, -3 * 2^-9 * 2.
  const std::vector<float> in = block_of({1000, 3, -0.01f});
  const MxBlocks ocp = hg::mx_quantize(hg::mx::mxfp8_e4m3, in);
  CHECK(hex8(ocp.scales[0]) == hex8(128));
  CHECK(hex8(ocp.elements[0]) == hex8(0x7E));
  CHECK(hex8(ocp.elements[1]) == hex8(0x3C));
  CHECK(hex8(ocp.elements[2]) == hex8(0x83));
  const std::vector<float> ocp_out = dequantized(ocp);
  CHECK(ocp_out[0] == 896.0f);
  CHECK(ocp_out[1] == 3.0f);
  CHECK(ocp_out[2] == -0x3p-8f);
  // Round-up: X = ceil(log2(1000 / 448)) = ceil(1.16) = 2 (code 129). 1000 / 4 = 250 lies between
  // 240 and 256 (quantum 16 in [128, 256)), nearer 256 = 2^8: field 15 -> 0x78, decoding to 1024.
  // 3 / 4 = 0.75 = 1.1b * 2^-1: field 6, mantissa 100 -> 0x34. -0.01 / 4 = 1.28 * 2^-9 -> 0x81,
  // -2^-9 * 4: the small value keeps one binade less.
  const MxBlocks up = hg::mx_quantize(hg::mx::mxfp8_e4m3, in, kRoundUp);
  CHECK(hex8(up.scales[0]) == hex8(129));
  CHECK(hex8(up.elements[0]) == hex8(0x78));
  CHECK(hex8(up.elements[1]) == hex8(0x34));
  CHECK(hex8(up.elements[2]) == hex8(0x81));
  const std::vector<float> up_out = dequantized(up);
  CHECK(up_out[0] == 1024.0f);
  CHECK(up_out[1] == 3.0f);
  CHECK(up_out[2] == -0x1p-7f);
}

TEST_CASE("MXFP4: amax 7 is clamped to 6 by the OCP rule, rounded to 8 by round-up", "[precision][mx]") {
  // OCP: X = floor(log2 7) - 2 = 0; 7 > 6 -> code 7 (6). 0.5 -> code 1, kept.
  // Round-up: 7 / 2^0 > 6, so X = 1; 7 / 2 = 3.5 ties 3|4 -> even code 6 (4) -> 8; 0.5 / 2 = 0.25
  // ties 0|0.5 -> 0: flushed.
  const std::vector<float> in = block_of({7, 0.5f});
  const std::vector<float> ocp = dequantized(hg::mx_quantize(hg::mx::mxfp4, in));
  const std::vector<float> up = dequantized(hg::mx_quantize(hg::mx::mxfp4, in, kRoundUp));
  CHECK(ocp[0] == 6.0f);
  CHECK(ocp[1] == 0.5f);
  CHECK(up[0] == 8.0f);
  CHECK(up[1] == 0.0f);
}

TEST_CASE("MXINT8: k / 64 with |k| <= 127, two's complement, symmetric clamp", "[precision][mx]") {
  // amax 1.999: X = floor(log2 1.999) - 0 = 0. 1.5 * 64 = 96 (0x60); -0.3 * 64 = -19.2 -> -19
  // (0xED); 1.999 * 64 = 127.94 -> 128 -> clamped to 127 (0x7F); 2^-7 * 64 = 0.5 ties 0|1 -> 0.
  const std::vector<float> in = block_of({1.5f, -0.3f, 1.999f, 0x1p-7f});
  const MxBlocks q = hg::mx_quantize(hg::mx::mxint8, in);
  CHECK(hex8(q.scales[0]) == hex8(127));
  CHECK(hex8(q.elements[0]) == hex8(0x60));
  CHECK(hex8(q.elements[1]) == hex8(0xED));
  CHECK(hex8(q.elements[2]) == hex8(0x7F));
  CHECK(hex8(q.elements[3]) == hex8(0x00));
  const std::vector<float> out = dequantized(q);
  CHECK(out[0] == 1.5f);
  CHECK(out[1] == -19.0f / 64);
  CHECK(out[2] == 127.0f / 64);
  CHECK(out[3] == 0.0f);
  // -128 (0x80) is -2.0 when decoded, though never produced.
  MxBlocks hand = q;
  hand.elements[0] = 0x80;
  CHECK(dequantized(hand)[0] == -2.0f);
  // E8M0's top: f32's max has floor(log2) = 127, so X = 127 under the OCP rule; round-up wants
  // 128 (amax / 2^127 = 1.99999994 > 127/64) and is clamped to 127, so the element clamps.
  const float big = std::numeric_limits<float>::max();
  const MxBlocks top = hg::mx_quantize(hg::mx::mxint8, block_of({big}), kRoundUp);
  CHECK(hex8(top.scales[0]) == hex8(254));
  CHECK(dequantized(top)[0] == std::ldexp(127.0f / 64, 127));
}

TEST_CASE("MX: NaN or inf poisons its block, zeros get the smallest scale, the last block may be short",
          "[precision][mx]") {
  std::vector<float> in(70, 1.0f);
  in[5] = std::numeric_limits<float>::quiet_NaN();
  in[40] = -std::numeric_limits<float>::infinity();
  for (size_t i = 64; i < 70; ++i) in[i] = 0.0f;
  in[65] = -0.0f;
  const MxBlocks q = hg::mx_quantize(hg::mx::mxfp8_e5m2, in);
  REQUIRE(q.scales.size() == 3);  // 32 + 32 + 6
  CHECK(hex8(q.scales[0]) == hex8(hg::kE8M0Nan));
  CHECK(hex8(q.scales[1]) == hex8(hg::kE8M0Nan));
  CHECK(hex8(q.scales[2]) == hex8(0));  // all zero: X = -127
  const std::vector<float> out = dequantized(q);
  for (size_t i = 0; i < 64; ++i) CHECK(std::isnan(out[i]));
  for (size_t i = 64; i < 70; ++i) CHECK(out[i] == 0.0f);
  CHECK(std::signbit(out[65]));
  // A short last block takes its scale from its own values: 3 in e2m1 gives X = 1 - 2 = -1
  // (code 126) and the element 6 (code 7).
  std::vector<float> short_in(33, 0.25f);
  short_in[32] = 3.0f;
  const MxBlocks s = hg::mx_quantize(hg::mx::mxfp4, short_in);
  REQUIRE(s.scales.size() == 2);
  CHECK(hex8(s.scales[1]) == hex8(126));
  CHECK(hex8(s.elements[32]) == hex8(0x7));
  CHECK(dequantized(s)[32] == 3.0f);
}

TEST_CASE("MX: values a block can represent survive the round trip exactly, under both rules", "[precision][mx]") {
  // Each block: a random scale X and random element codes, the first being +-max, so both rules
  // must choose X again (floor(log2(max 2^X)) - emax = X; max 2^X / 2^X <= max) and every value is
  // representable: dequantize(quantize(v)) == v.
  std::mt19937 rng(19);
  const MxFormat formats[] = {hg::mx::mxfp8_e4m3, hg::mx::mxfp8_e5m2, hg::mx::mxfp6_e3m2,
                              hg::mx::mxfp6_e2m3, hg::mx::mxfp4,      hg::mx::mxint8};
  for (const MxFormat& format : formats) {
    INFO(format.name);
    const hg::FloatFormat e = format.element;
    std::vector<float> values;
    std::vector<int> exponents;
    for (int block = 0; block < 40; ++block) {
      const int x = int(rng() % 231) - 120;  // [-120, 110]: every value stays a normal-range float
      exponents.push_back(x);
      for (int i = 0; i < 32; ++i) {
        uint32_t code = i == 0 ? e.max_finite_bits() | (rng() % 2 ? e.sign_mask() : 0)
                               : uint32_t(rng()) & ((1u << e.storage_bits()) - 1);
        while (!std::isfinite(hg::decode(e, code))) code = uint32_t(rng()) & ((1u << e.storage_bits()) - 1);
        values.push_back(std::ldexp(hg::decode(e, code), x));
      }
    }
    for (const MxOptions& options : {MxOptions{}, kRoundUp}) {
      const MxBlocks q = hg::mx_quantize(format, values, options);
      for (size_t b = 0; b < exponents.size(); ++b) CHECK(q.scale_exponent(b) == exponents[b]);
      const std::vector<float> out = dequantized(q);
      int mismatches = 0;
      for (size_t i = 0; i < values.size(); ++i) {
        if (out[i] != values[i] && ++mismatches <= 3) FAIL_CHECK(i << ": " << values[i] << " -> " << out[i]);
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("MX: mx_round_to is quantize then dequantize, and bad arguments throw", "[precision][mx]") {
  std::vector<float> in = block_of({1000, 3, -0.01f});
  const std::vector<float> want = dequantized(hg::mx_quantize(hg::mx::mxfp8_e4m3, in));
  hg::mx_round_to(hg::mx::mxfp8_e4m3, in);
  CHECK(in == want);

  CHECK_THROWS_AS(hg::mx_quantize(hg::mx::mxfp4, in, {.block_size = 0}), hg::Error);
  CHECK_THROWS_AS(hg::mx_quantize(hg::mx::mxfp4, in, {.rounding = Rounding::kStochastic}), hg::Error);
  const MxBlocks q = hg::mx_quantize(hg::mx::mxfp4, in);
  std::vector<float> wrong(31);
  CHECK_THROWS_WITH(hg::mx_dequantize(q, wrong), Catch::Contains("mxfp4_e2m1") && Catch::Contains("31"));
}
