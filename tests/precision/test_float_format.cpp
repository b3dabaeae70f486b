// The conversion core (halfgrad/precision/float_format.h): the derived format constants, every rounding
// mode of encode at hand-derived boundaries (ties, subnormal edge, overflow, saturation, flush),
// stochastic rounding's documented function and its unbiasedness, NaN encoding, and a random
// sweep of all four formats x five deterministic modes against the independent exact oracle.
// Format-specific tables (bf16, fp8) and the CPU-instruction sweeps live in their own files.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/rounding.h"
#include "tests/precision/oracles.h"
#include "tests/float_specials.h"

namespace {

using hg::precision::decode;
using hg::precision::encode;
using hg::precision::FloatFormat;
using hg::precision::kBFloat16;
using hg::precision::kBinary16;
using hg::precision::kE4M3;
using hg::precision::kE5M2;
using hg::precision::Rounding;
using hg::precision::RoundingOptions;
using hg::precision::oracle::exact_of;
using hg::precision::oracle::exact_round;
using hg::precision::oracle::ExactFormat;
using hg::precision::oracle::ExactMode;
using hg::precision::oracle::hex16;
using hg::precision::oracle::hex32;
using hg::precision::oracle::hex8;
using hg::precision::oracle::hexfloat;

using hg::testing::kInf;

uint16_t f16(double x, RoundingOptions options = {}) { return uint16_t(encode<kBinary16>(x, options)); }

// The same conversion through the oracle, which knows nothing of float_format.h.
uint32_t f16_oracle(double x, ExactMode mode, bool saturate = false, bool flush = false) {
  if (std::isinf(x)) return std::signbit(x) ? 0xFC00 : 0x7C00;
  const auto v = exact_of(x);
  return exact_round(v.negative, v.magnitude, v.scale, hg::precision::oracle::kExactF16, mode, saturate, flush);
}

// The fifth, nearest-away, is swept against the oracle below; the hand table covers the first 4.
constexpr Rounding kTableRoundings[5] = {Rounding::kNearestEven, Rounding::kTowardZero, Rounding::kUp, Rounding::kDown,
                                         Rounding::kNearestAway};
constexpr ExactMode kTableExactModes[5] = {ExactMode::kNearestEven, ExactMode::kTowardZero, ExactMode::kUp,
                                           ExactMode::kDown, ExactMode::kNearestAway};
const char* const kTableModeNames[5] = {"nearest-even", "toward-zero", "up", "down", "nearest-away"};

}  // namespace

TEST_CASE("format constants follow from the field widths", "[precision][float_format]") {
  CHECK(kBinary16.storage_bits() == 16);
  CHECK(kBinary16.exponent_bias == 15);
  CHECK(kBinary16.min_exponent() == -14);
  CHECK(hex16(kBinary16.sign_mask()) == hex16(0x8000));
  CHECK(hex16(kBinary16.mantissa_mask()) == hex16(0x03FF));
  CHECK(hex16(kBinary16.inf_bits()) == hex16(0x7C00));
  CHECK(hex16(kBinary16.max_finite_bits()) == hex16(0x7BFF));
  CHECK(hex16(kBinary16.nan_bits()) == hex16(0x7E00));

  CHECK(kBFloat16.exponent_bias == 127);
  CHECK(kBFloat16.min_exponent() == -126);
  CHECK(hex16(kBFloat16.inf_bits()) == hex16(0x7F80));
  CHECK(hex16(kBFloat16.max_finite_bits()) == hex16(0x7F7F));
  CHECK(hex16(kBFloat16.nan_bits()) == hex16(0x7FC0));

  // e4m3: S.1111.000-110 are finite (256..448), S.1111.111 is the only NaN.
  CHECK(kE4M3.exponent_bias == 7);
  CHECK(kE4M3.min_exponent() == -6);
  CHECK_FALSE(kE4M3.has_inf());
  CHECK(hex8(kE4M3.max_finite_bits()) == hex8(0x7E));
  CHECK(hex8(kE4M3.nan_bits()) == hex8(0x7F));

  CHECK(kE5M2.exponent_bias == 15);
  CHECK(hex8(kE5M2.inf_bits()) == hex8(0x7C));
  CHECK(hex8(kE5M2.max_finite_bits()) == hex8(0x7B));
  CHECK(hex8(kE5M2.nan_bits()) == hex8(0x7E));

  CHECK(std::string(format_name(kBinary16)) == "f16");
  CHECK(std::string(format_name(kBFloat16)) == "bf16");
  CHECK(std::string(format_name(kE4M3)) == "e4m3");
  CHECK(std::string(format_name(kE5M2)) == "e5m2");
  CHECK(std::string(format_name(FloatFormat{6, 9, hg::precision::Specials::kIeee})) == "custom");
}

TEST_CASE("exp2_float is exact over the whole float exponent range", "[precision][float_format]") {
  for (int k = -149; k <= 127; ++k) {
    INFO("k = " << k);
    CHECK(double(hg::precision::exp2_float(k)) == std::ldexp(1.0, k));
  }
}

// Compile-time: the core is constexpr, so constants such as numeric_limits can use it.
static_assert(encode<kBinary16>(1.0) == 0x3C00);
static_assert(encode<kBinary16>(-2.0) == 0xC000);
static_assert(decode<kBinary16>(0x3555) == 0x1.554p-2f);
static_assert(encode<kE4M3>(448.0) == 0x7E);

// Every entry is worked out by hand from f16's grid: in [1,2) the spacing (ulp) is 2^-10, so the
// ties sit at odd multiples of 2^-11; in [2^-1,1) the spacing is 2^-11; below 2^-14 the spacing
// is the smallest subnormal 2^-24; the largest finite value is 65504 = (2 - 2^-10) * 2^15 with
// spacing 32 above 2^15, so max + half ulp = 65520. A tie goes to the neighbour whose mantissa is
// even. `up`/`down` round toward +inf/-inf; every `up` result is the next value above x when x
// is inexact. The mirror of every row (-x) is checked too: nearest and toward-zero flip the sign
// bit, up and down swap.
TEST_CASE("f16 encode: every directed mode at hand-derived boundaries", "[precision][float_format]") {
  struct Case {
    double x;
    uint16_t nearest, toward_zero, up, down;
    const char* why;
  };
  const Case cases[] = {
      {1.0, 0x3C00, 0x3C00, 0x3C00, 0x3C00, "exact"},
      {1 + 0x1p-11, 0x3C00, 0x3C00, 0x3C01, 0x3C00,
       "tie between 1.0 (mantissa 0, even) and 1+2^-10 (0x3C01): even is 1.0"},
      {1 + 0x1p-11 + 0x1p-40, 0x3C01, 0x3C00, 0x3C01, 0x3C00, "just above that tie"},
      {1 + 0x1p-11 - 0x1p-40, 0x3C00, 0x3C00, 0x3C01, 0x3C00, "just below that tie"},
      {1 + 3 * 0x1p-11, 0x3C02, 0x3C01, 0x3C02, 0x3C01,
       "1+3*2^-11 is the tie between 1+2^-10 (0x3C01, odd) and 1+2^-9 (0x3C02, even)"},
      {1 + 0x1p-40, 0x3C00, 0x3C00, 0x3C01, 0x3C00, "far below half an ulp"},
      {1 - 0x1p-12, 0x3C00, 0x3BFF, 0x3C00, 0x3BFF,
       "below 1 the spacing is 2^-11: tie between 1-2^-11 (0x3BFF, odd) and 1.0 (even)"},
      {0x1p-24, 0x0001, 0x0001, 0x0001, 0x0001, "the smallest subnormal, exact"},
      {0x1p-25, 0x0000, 0x0000, 0x0001, 0x0000, "half the smallest subnormal: tie between 0 (even) and 2^-24 (odd)"},
      {0x1p-25 + 0x1p-50, 0x0001, 0x0000, 0x0001, 0x0000, "just above that tie"},
      {3 * 0x1p-26, 0x0001, 0x0000, 0x0001, 0x0000, "0.75 of 2^-24: nearer 2^-24"},
      {0x1p-26, 0x0000, 0x0000, 0x0001, 0x0000, "0.25 of 2^-24: nearer 0"},
      {3 * 0x1p-25, 0x0002, 0x0001, 0x0002, 0x0001, "1.5 * 2^-24: tie, 2 is even"},
      {1023.5 * 0x1p-24, 0x0400, 0x03FF, 0x0400, 0x03FF,
       "tie between the largest subnormal 1023*2^-24 (odd) and the smallest normal 2^-14 (even)"},
      {0x1p-14, 0x0400, 0x0400, 0x0400, 0x0400, "the smallest normal, exact"},
      {0x1p-1074, 0x0000, 0x0000, 0x0001, 0x0000, "the smallest double (a double subnormal)"},
      {65504.0, 0x7BFF, 0x7BFF, 0x7BFF, 0x7BFF, "max, exact"},
      {65519.99, 0x7BFF, 0x7BFF, 0x7C00, 0x7BFF,
       "below max + half ulp: nearest is max; up passes max and overflows to inf"},
      {65520.0, 0x7C00, 0x7BFF, 0x7C00, 0x7BFF,
       "max + half ulp: tie, max's mantissa 0x3FF is odd, so nearest goes up past max: inf"},
      {1e6, 0x7C00, 0x7BFF, 0x7C00, 0x7BFF, "overflow: toward zero and down stop at max"},
      {1e300, 0x7C00, 0x7BFF, 0x7C00, 0x7BFF, "beyond f32's range too"},
      {kInf, 0x7C00, 0x7C00, 0x7C00, 0x7C00, "inf is exact in every mode"},
      {0.0, 0x0000, 0x0000, 0x0000, 0x0000, "zero"},
  };
  for (const Case& c : cases) {
    const uint16_t expected[4] = {c.nearest, c.toward_zero, c.up, c.down};
    const uint16_t mirrored[4] = {uint16_t(0x8000 | c.nearest), uint16_t(0x8000 | c.toward_zero),
                                  uint16_t(0x8000 | c.down), uint16_t(0x8000 | c.up)};
    for (int m = 0; m < 4; ++m) {
      INFO("x = " << hexfloat(c.x) << " (" << c.why << "), mode " << kTableModeNames[m]);
      CHECK(hex16(f16(c.x, {.mode = kTableRoundings[m]})) == hex16(expected[m]));
      CHECK(hex16(f16(-c.x, {.mode = kTableRoundings[m]})) == hex16(mirrored[m]));
      // The table also pins the oracle that the random sweeps below rely on.
      CHECK(hex16(f16_oracle(c.x, kTableExactModes[m])) == hex16(expected[m]));
      CHECK(hex16(f16_oracle(-c.x, kTableExactModes[m])) == hex16(mirrored[m]));
    }
  }
}

TEST_CASE("f16 encode: saturation clamps finite overflow to max and keeps inf", "[precision][float_format]") {
  const RoundingOptions sat{.saturate = true};
  CHECK(hex16(f16(1e6, sat)) == hex16(0x7BFF));
  CHECK(hex16(f16(-1e6, sat)) == hex16(0xFBFF));
  CHECK(hex16(f16(65520.0, sat)) == hex16(0x7BFF));  // the tie that overflows without saturation
  CHECK(hex16(f16(65519.99, sat)) == hex16(0x7BFF));
  CHECK(hex16(f16(1e300, sat)) == hex16(0x7BFF));
  CHECK(hex16(f16(kInf, sat)) == hex16(0x7C00));
  CHECK(hex16(f16(-kInf, sat)) == hex16(0xFC00));
  CHECK(hex16(f16(std::nan(""), sat)) == hex16(0x7E00));
  CHECK(hex16(f16(1.0, sat)) == hex16(0x3C00));
  CHECK(hex16(f16(1e6, {.mode = Rounding::kUp, .saturate = true})) == hex16(0x7BFF));
  CHECK(hex16(f16(-1e6, {.mode = Rounding::kDown, .saturate = true})) == hex16(0xFBFF));
  CHECK(hex16(f16(65520.0, {.mode = Rounding::kStochastic, .saturate = true, .random_bits = 0xFFFFFFFFu})) ==
        hex16(0x7BFF));
}

TEST_CASE("f16 encode: flush_subnormals zeroes subnormal results after rounding", "[precision][float_format]") {
  const RoundingOptions ftz{.flush_subnormals = true};
  CHECK(hex16(f16(0x1p-15, ftz)) == hex16(0x0000));   // would be 0x0200
  CHECK(hex16(f16(-0x1p-15, ftz)) == hex16(0x8000));  // keeps the sign
  CHECK(hex16(f16(0x1p-24, ftz)) == hex16(0x0000));
  CHECK(hex16(f16(1023.25 * 0x1p-24, ftz)) == hex16(0x0000));  // rounds to 0x03FF: subnormal
  // Rounds up to the smallest normal: a normal result, kept.
  CHECK(hex16(f16(1023.5 * 0x1p-24, ftz)) == hex16(0x0400));
  CHECK(hex16(f16(0x1p-14 - 0x1p-30, ftz)) == hex16(0x0400));
  CHECK(hex16(f16(0x1p-14, ftz)) == hex16(0x0400));
  CHECK(hex16(f16(1.0, ftz)) == hex16(0x3C00));
  // Directed modes: up turns 2^-26 into 2^-24, which is flushed; it is not pushed to 2^-14.
  CHECK(hex16(f16(0x1p-26, {.mode = Rounding::kUp, .flush_subnormals = true})) == hex16(0x0000));
  CHECK(hex16(f16(-0x1p-26, {.mode = Rounding::kDown, .flush_subnormals = true})) == hex16(0x8000));
  CHECK(hex16(f16(0x1p-14 - 0x1p-30, {.mode = Rounding::kUp, .flush_subnormals = true})) == hex16(0x0400));
  CHECK(hex16(f16(0x1p-14 - 0x1p-30, {.mode = Rounding::kTowardZero, .flush_subnormals = true})) == hex16(0x0000));
}

TEST_CASE("encode: NaN stays NaN (quiet) with its sign and top payload bits", "[precision][float_format]") {
  // Double NaNs by bit pattern: the top fraction bit is the quiet bit, bits below are payload.
  const double quiet = std::bit_cast<double>(uint64_t{0x7FF8000000000001});
  const double signaling = std::bit_cast<double>(uint64_t{0x7FF4000000000000});  // payload 01...
  const double negative_signaling = std::bit_cast<double>(uint64_t{0xFFF4000000000000});
  // f16 keeps the top 10 fraction bits and sets the quiet bit (0x0200): 0x7C00|0x200|0x100.
  CHECK(hex16(encode<kBinary16>(quiet)) == hex16(0x7E00));
  CHECK(hex16(encode<kBinary16>(signaling)) == hex16(0x7F00));
  CHECK(hex16(encode<kBinary16>(negative_signaling)) == hex16(0xFF00));
  CHECK(hex16(encode<kBinary16>(signaling, {.saturate = true, .flush_subnormals = true})) == hex16(0x7F00));
  CHECK(hex16(encode<kBFloat16>(signaling)) == hex16(0x7FE0));  // 0x7F80|0x40|0x20
  CHECK(hex8(encode<kE5M2>(signaling)) == hex8(0x7F));          // 0x7C|0x2|0x1
  CHECK(hex8(encode<kE5M2>(quiet)) == hex8(0x7E));
  CHECK(hex8(encode<kE4M3>(signaling)) == hex8(0x7F));  // e4m3 has one NaN per sign
  CHECK(hex8(encode<kE4M3>(negative_signaling)) == hex8(0xFF));
}

// rounding.h: away iff frac32 + random_bits >= 2^32, frac32 = top 32 bits of the discarded
// fraction (in ulps). Hand values: 1 + 2^-12 is a quarter ulp above 1.0, so frac32 = 0x40000000
// and the threshold for random_bits is 2^32 - 0x40000000 = 0xC0000000.
TEST_CASE("stochastic rounding with fixed random bits is the documented function", "[precision][float_format]") {
  auto sr = [](double x, uint32_t r) { return hex16(f16(x, {.mode = Rounding::kStochastic, .random_bits = r})); };
  const double quarter = 1 + 0x1p-12;
  CHECK(sr(quarter, 0) == hex16(0x3C00));  // random_bits 0 truncates
  CHECK(sr(quarter, 0xBFFFFFFFu) == hex16(0x3C00));
  CHECK(sr(quarter, 0xC0000000u) == hex16(0x3C01));
  CHECK(sr(quarter, 0xFFFFFFFFu) == hex16(0x3C01));   // all ones rounds away when frac32 > 0
  CHECK(sr(-quarter, 0xC0000000u) == hex16(0xBC01));  // away from zero, not toward +inf
  CHECK(sr(-quarter, 0xBFFFFFFFu) == hex16(0xBC00));
  // Exact values never move.
  CHECK(sr(1.0, 0xFFFFFFFFu) == hex16(0x3C00));
  CHECK(sr(3 * 0x1p-24, 0xFFFFFFFFu) == hex16(0x0003));
  CHECK(sr(0.0, 0xFFFFFFFFu) == hex16(0x0000));
  // Inexact by less than 2^-32 ulp: frac32 = 0, so even all-ones bits truncate. This is the
  // documented bias bound (2^-32 ulp), not "always away when inexact".
  CHECK(sr(1 + 0x1p-43, 0xFFFFFFFFu) == hex16(0x3C00));
  // Subnormal: 5.5 * 2^-24 has frac32 = 0x80000000.
  CHECK(sr(5.5 * 0x1p-24, 0x7FFFFFFFu) == hex16(0x0005));
  CHECK(sr(5.5 * 0x1p-24, 0x80000000u) == hex16(0x0006));
  // Rounding away past max overflows like nearest does.
  CHECK(sr(65520.0, 0x7FFFFFFFu) == hex16(0x7BFF));
  CHECK(sr(65520.0, 0x80000000u) == hex16(0x7C00));

  // The same function on random inputs in [1,2), computed independently in double: there
  // x = 1 + (k + frac) * 2^-10 with k = floor((x-1) * 2^10), and (x-1)*2^10, frac and
  // frac * 2^32 are exact in double.
  std::mt19937_64 rng(7);
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = 1 + double(rng() >> 11) * 0x1p-53;
    const uint32_t r = uint32_t(rng());
    const double scaled = (x - 1) * 1024;
    const double k = std::floor(scaled);
    const uint64_t frac32 = uint64_t((scaled - k) * 0x1p32);
    const uint32_t expected = 0x3C00u + uint32_t(k) + (frac32 + r >= (uint64_t{1} << 32) ? 1 : 0);
    const uint16_t got = f16(x, {.mode = Rounding::kStochastic, .random_bits = r});
    if (got != expected && mismatches++ == 0) {
      INFO("x = " << hexfloat(x) << " random_bits = " << hex32(r));
      CHECK(hex16(got) == hex16(expected));
    }
  }
  CHECK(mismatches == 0);
}

// Over n draws, the count of round-aways is Binomial(n, p) with p = frac32 / 2^32, so the mean
// of the rounded values is lo + ulp * count / n, with expectation lo + ulp * p, which differs
// from x by less than ulp * 2^-32 (frac32 drops the rest of the fraction). Its standard error is
// ulp * sqrt(p(1-p)/n); we allow 5 standard errors (two-sided miss probability ~6e-7 for a good
// generator; the seed is fixed, so the test is deterministic) plus the 2^-32 ulp bias.
TEST_CASE("stochastic rounding is unbiased to 5 standard errors", "[precision][float_format]") {
  struct Case {
    double lo, ulp, p;
    const char* where;
  };
  const Case cases[] = {
      {1.0, 0x1p-10, 0.3, "normal: x = 1 + 0.3 ulp"},
      {7 * 0x1p-24, 0x1p-24, 0.7, "subnormal: x = (7 + 0.7) * 2^-24"},
      {-1.0, -0x1p-10, 0.3, "negative: x = -(1 + 0.3 ulp)"},
  };
  constexpr int kDraws = 1000000;
  std::mt19937 rng(20240611);
  for (const Case& c : cases) {
    const double x = c.lo + c.p * c.ulp;
    double sum = 0;  // multiples of 2^-24 below 2^21: every partial sum is exact
    for (int i = 0; i < kDraws; ++i) {
      sum += decode<kBinary16>(encode<kBinary16>(x, {.mode = Rounding::kStochastic, .random_bits = uint32_t(rng())}));
    }
    const double mean = sum / kDraws;
    const double std_error = std::fabs(c.ulp) * std::sqrt(c.p * (1 - c.p) / kDraws);
    INFO(c.where << ": mean = " << hexfloat(mean) << ", x = " << hexfloat(x)
                 << ", (mean - x) / std_error = " << (mean - x) / std_error);
    CHECK(std::fabs(mean - x) <= 5 * std_error + std::fabs(c.ulp) * 0x1p-32);
  }
}

namespace {

struct SweepFormat {
  const char* name;
  ExactFormat exact;
  int min_exponent, max_exponent;  // of the smallest normal and of max's binade
};

template <FloatFormat F>
int sweep_against_oracle(const SweepFormat& sf, uint64_t seed, int draws) {
  std::mt19937_64 rng(seed);
  int mismatches = 0;
  const int p = sf.exact.precision;
  for (int i = 0; i < draws; ++i) {
    // Exponents from well below the smallest subnormal to above the overflow threshold; every
    // third draw keeps only p+1 significant bits, which makes exact values and ties common.
    const int exponent = sf.min_exponent - p - 4 + int(rng() % uint64_t(sf.max_exponent - sf.min_exponent + p + 8));
    uint64_t fraction = rng() >> 12;
    if (i % 3 == 0) fraction &= ~((uint64_t{1} << (52 - p)) - 1);
    double x = std::ldexp(1 + double(fraction) * 0x1p-52, exponent);
    if (rng() & 1) x = -x;
    const int m = int(rng() % 5);
    const bool saturate = (rng() & 3) == 0, flush = (rng() & 3) == 0;
    const uint32_t got = encode<F>(x, {.mode = kTableRoundings[m], .saturate = saturate, .flush_subnormals = flush});
    const auto v = exact_of(x);
    const uint32_t expected =
        exact_round(v.negative, v.magnitude, v.scale, sf.exact, kTableExactModes[m], saturate, flush);
    if (got != expected && mismatches++ == 0) {
      INFO(sf.name << ": x = " << hexfloat(x) << ", mode " << kTableModeNames[m] << ", saturate " << saturate
                   << ", flush " << flush);
      CHECK(hex16(got) == hex16(expected));
    }
  }
  return mismatches;
}

}  // namespace

TEST_CASE("encode agrees with the exact oracle: 4 formats x 5 modes x saturate x flush", "[precision][float_format]") {
  using hg::precision::oracle::kExactBF16;
  using hg::precision::oracle::kExactE4M3;
  using hg::precision::oracle::kExactE5M2;
  using hg::precision::oracle::kExactF16;
  constexpr int kDraws = 300000;
  CHECK(sweep_against_oracle<kBinary16>({"f16", kExactF16, -14, 15}, 1, kDraws) == 0);
  CHECK(sweep_against_oracle<kBFloat16>({"bf16", kExactBF16, -126, 127}, 2, kDraws) == 0);
  CHECK(sweep_against_oracle<kE4M3>({"e4m3", kExactE4M3, -6, 8}, 3, kDraws) == 0);
  CHECK(sweep_against_oracle<kE5M2>({"e5m2", kExactE5M2, -14, 15}, 4, kDraws) == 0);
}
