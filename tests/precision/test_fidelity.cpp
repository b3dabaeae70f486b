// halfgrad/precision/fidelity.h: the three numbers on a hand-computed vector, and on a gradient-like
// log-normal sample the orderings the formats demo's table shows (each could fail: MX blocks must
// keep what plain fp8 flushes, fewer bits must cost precision, f16's error must stay within its
// unit roundoff).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "halfgrad/precision/arithmetic.h"
#include "halfgrad/precision/fidelity.h"

namespace {

// Random signs, log-normal magnitudes around 1e-3 with sigma 2.5 in ln (about 1e-7 .. 5): the
// spread of a gradient, far wider than one fp8 binade range.
std::vector<float> log_normal_sample(unsigned seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<float> magnitude(std::log(1e-3f), 2.5f);
  std::vector<float> values(4096);
  for (float& v : values) v = (rng() & 1) != 0 ? -magnitude(rng) : magnitude(rng);
  return values;
}

}  // namespace

TEST_CASE("fidelity: a hand-computed e2m1 vector", "[precision][fidelity]") {
  // e2m1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6. 7 -> 6 (clamped, error 1/7); 0.1 -> 0 (flushed, error 1);
  // 1.25 ties 1|1.5 -> 1 (error 0.2); 3 exact; 0 and inf/NaN are left out of the count.
  const std::vector<float> v = {7, 0.1f, 1.25f, 3, 0, INFINITY, NAN};
  const hg::Fidelity f = hg::fidelity(hg::formats::e2m1, v);
  CHECK(f.count == 4);
  CHECK(f.flushed_fraction == 0.25);
  CHECK(f.clamped_fraction == 0.25);
  const double e01 = (0.0 - double(0.1f)) / double(0.1f);  // -1 exactly
  CHECK(f.rms_relative_error == Approx(std::sqrt((1.0 / 49 + e01 * e01 + 0.04 + 0) / 4)).epsilon(1e-12));
  // The same vector as one MX block: amax 7 -> X = 0 under the OCP rule, so the same values,
  // except that the block holds inf and NaN: scale NaN, and the block is left out.
  CHECK(hg::fidelity(hg::mx::mxfp4, v).count == 0);
  const std::vector<float> finite = {7, 0.1f, 1.25f, 3};
  const hg::Fidelity block = hg::fidelity(hg::mx::mxfp4, finite);
  CHECK(block.count == 4);
  CHECK(block.clamped_fraction == 0.25);
  CHECK(block.flushed_fraction == 0.25);
  // Round-up: X = 1 (7 > 6), nothing clamps; 7/2 = 3.5 -> 4 (8), 0.1 -> 0, 1.25/2 -> 0.5 (1), 3/2 -> 1.5.
  const hg::Fidelity up = hg::fidelity(hg::mx::mxfp4, finite, {.scale_rule = hg::MxScaleRule::kRoundUp});
  CHECK(up.clamped_fraction == 0);
  CHECK(up.flushed_fraction == 0.25);
}

TEST_CASE("fidelity: on a gradient-like sample MX keeps what plain fp8 flushes, fewer bits cost precision",
          "[precision][fidelity]") {
  const std::vector<float> v = log_normal_sample(7);
  const hg::Fidelity f16 = hg::fidelity(hg::formats::f16, v), e4m3 = hg::fidelity(hg::formats::e4m3, v),
                     e2m1 = hg::fidelity(hg::formats::e2m1, v), mxfp8 = hg::fidelity(hg::mx::mxfp8_e4m3, v),
                     mxfp8_up = hg::fidelity(hg::mx::mxfp8_e4m3, v, {.scale_rule = hg::MxScaleRule::kRoundUp}),
                     mxfp4 = hg::fidelity(hg::mx::mxfp4, v);
  REQUIRE(e4m3.count == v.size());
  // e4m3's smallest subnormal is 2^-9 ~ 0.002: about half of a sample centred on 1e-3 is flushed.
  CHECK(e4m3.flushed_fraction > 0.3);
  // MXFP8 moves e4m3's range to each block: a value is flushed only below 2^-9 * 2^X, about 2^-17
  // of its block's largest (ln 2^17 = 11.8 = 4.7 sigma, while a block's largest of 32 lies ~2 sigma
  // above the centre), against 2^-9 ~ 0.27 sigma above the centre for plain e4m3.
  CHECK(mxfp8.flushed_fraction < e4m3.flushed_fraction / 4);
  CHECK(mxfp8.rms_relative_error < e4m3.rms_relative_error);
  // 2 significant bits against 4: e2m1 loses more everywhere, plain or blocked.
  CHECK(e2m1.rms_relative_error > e4m3.rms_relative_error);
  CHECK(mxfp4.rms_relative_error > mxfp8.rms_relative_error);
  // f16's error is at most the unit roundoff 2^-11 on normals and grows on its subnormals (below
  // 2^-14 ~ 6e-5, about 1.1 sigma under the centre), yet stays far below e4m3's, which flushes half.
  CHECK(f16.rms_relative_error < e4m3.rms_relative_error / 8);
  // The OCP rule clamps some block maxima (significand above 1.75); round-up never clamps.
  CHECK(mxfp8.clamped_fraction > 0);
  CHECK(mxfp8_up.clamped_fraction == 0);
  CHECK(e4m3.clamped_fraction == 0);  // nothing in the sample exceeds 448
}

TEST_CASE("fidelity: merging two parts' numbers gives the whole vector's", "[precision][fidelity]") {
  // Each number is a mean over the finite nonzero inputs, so a count-weighted merge of two parts
  // is the measurement of their concatenation (up to the rounding of the means).
  const std::vector<float> all = log_normal_sample(11);
  const std::vector<float> head(all.begin(), all.begin() + 1000), tail(all.begin() + 1000, all.end());
  const hg::Fidelity whole = hg::fidelity(hg::formats::e4m3, all);
  hg::Fidelity merged = hg::fidelity(hg::formats::e4m3, head);
  merged.merge(hg::fidelity(hg::formats::e4m3, tail));
  CHECK(merged.count == whole.count);
  CHECK(merged.rms_relative_error == Approx(whole.rms_relative_error).epsilon(1e-12));
  CHECK(merged.flushed_fraction == Approx(whole.flushed_fraction).epsilon(1e-12));
  CHECK(merged.clamped_fraction == Approx(whole.clamped_fraction).margin(1e-15));
  hg::Fidelity empty;
  empty.merge(hg::Fidelity{});
  CHECK(empty.count == 0);
}

TEST_CASE("docs/formats.md examples", "[precision][fidelity][docs]") {
  // The page's snippets as written there, with their stated results asserted.
  uint32_t b = hg::encode(hg::formats::e2m1, 2.7);  // 0x5: 3.0, the nearest value
  float x = hg::decode(hg::formats::e2m1, b);       // 3.0f
  uint32_t s = hg::precision::add_bits(hg::formats::e2m1, b, b, {.mode = hg::Rounding::kDown});  // 0x7: 6
  CHECK(b == 0x5);
  CHECK(x == 3.0f);
  CHECK(s == 0x7);

  constexpr hg::FloatFormat e3m2_ftz{
      .exponent_bits = 3, .mantissa_bits = 2, .specials = hg::Specials::kFiniteOnly, .subnormals = false};
  static_assert(hg::encode<e3m2_ftz>(0.2) == 0x04);  // 0.2 rounds to the smallest normal 0.25

  std::vector<float> values = log_normal_sample(3);
  hg::MxBlocks q = hg::mx_quantize(hg::mx::mxfp4, values);  // q.scales: E8M0, q.elements: codes
  std::vector<float> back(values.size());
  hg::mx_dequantize(q, back);                                                              // exact 2^X * P_i
  hg::mx_round_to(hg::mx::mxfp8_e4m3, values, {.scale_rule = hg::MxScaleRule::kRoundUp});  // in place
  CHECK(q.scales.size() == 4096 / 32);
  CHECK(back != values);

  const std::vector<float> grads = log_normal_sample(4);
  hg::Fidelity plain = hg::fidelity(hg::formats::e4m3, grads);   // saturating rounding
  hg::Fidelity block = hg::fidelity(hg::mx::mxfp8_e4m3, grads);  // far fewer flushed
  CHECK(block.flushed_fraction < plain.flushed_fraction);
}
