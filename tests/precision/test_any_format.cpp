// Any format at run time (float_format.h: FloatFormat with specials, subnormals and bias; the
// presets tf32 and the OCP MX elements e3m2, e2m3, e2m1): the preset tables against the sources,
// and, in `[exhaustive]`, every encoding of the small formats (and variants without subnormals or
// with another bias) against the test's own reading of the fields, f32 inputs around every value
// in every rounding mode and all pairs of + - * / against rounding onto the format's value set
// (oracles.h value_set_round: comparisons only, no field arithmetic); tf32 against the classic
// f32 bit trick.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/arithmetic.h"
#include "halfgrad/precision/float_format.h"
#include "tests/precision/oracles.h"
#include "tests/precision/sweep_modes.h"

namespace {

using hg::precision::FloatFormat;
using hg::precision::Rounding;
using hg::precision::RoundingOptions;
using hg::precision::Specials;
using hg::precision::oracle::ExactMode;
using hg::precision::oracle::hex16;
using hg::precision::oracle::hexfloat;
using hg::precision::oracle::ValueSet;

using hg::testing::kExactModes;
using hg::testing::kModes;

// The formats swept: the MX elements, a variant without subnormals, others with a non-default
// bias (one with IEEE specials and no subnormals), and the builtin-like formats.
constexpr FloatFormat kSwept[] = {
    hg::formats::e3m2,
    hg::formats::e2m3,
    hg::formats::e2m1,
    {.exponent_bits = 3, .mantissa_bits = 2, .specials = Specials::kFiniteOnly, .subnormals = false},
    {.exponent_bits = 3, .mantissa_bits = 2, .specials = Specials::kFiniteOnly, .exponent_bias = 5},
    {.exponent_bits = 4, .mantissa_bits = 3, .specials = Specials::kIeee, .subnormals = false, .exponent_bias = 9},
    {.exponent_bits = 4, .mantissa_bits = 3, .specials = Specials::kNanOnly, .exponent_bias = 4},
    hg::formats::e4m3,
    hg::formats::e5m2,
    hg::formats::f16,
    hg::formats::bf16,
};

// What a bit pattern means, read from the definition: sign, exponent field, mantissa field;
// (1 + m / 2^M) 2^(field - bias) for a normal, m / 2^M 2^(1 - bias) for a subnormal (zero without
// subnormals), inf/NaN per the convention. Written without float_format.h's helpers.
double definition_value(FloatFormat f, uint32_t bits) {
  const int M = f.mantissa_bits, E = f.exponent_bits;
  const bool negative = ((bits >> (E + M)) & 1) != 0;
  const uint32_t field = (bits >> M) & ((1u << E) - 1), mantissa = bits & ((1u << M) - 1);
  const bool top = field == (1u << E) - 1;
  double value;
  if (top && f.specials == Specials::kIeee) {
    value = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (top && f.specials == Specials::kNanOnly && mantissa == (1u << M) - 1) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (field == 0) {
    value = f.subnormals ? std::ldexp(double(mantissa), 1 - f.exponent_bias - M) : 0.0;
  } else {
    value = std::ldexp(1.0 + std::ldexp(double(mantissa), -M), int(field) - f.exponent_bias);
  }
  return negative ? -value : value;
}

// The format's value set from definition_value: non-negative finite values in increasing order
// (canonical encodings only: without subnormals, field 0 with m != 0 is a non-canonical zero).
ValueSet value_set(FloatFormat f) {
  ValueSet set;
  set.sign_mask = 1u << (f.exponent_bits + f.mantissa_bits);
  set.finite_only = f.specials == Specials::kFiniteOnly;
  set.min_normal = std::ldexp(1.0, 1 - f.exponent_bias);
  for (uint32_t bits = 0; bits < set.sign_mask; ++bits) {
    const double v = definition_value(f, bits);
    const bool canonical = f.subnormals || bits == 0 || (bits >> f.mantissa_bits) != 0;
    if (std::isfinite(v) && canonical) {
      set.values.push_back(v);
      set.codes.push_back(bits);
    } else if (!std::isfinite(v) && set.overflow_code == 0) {
      set.overflow_code = bits;  // inf (IEEE) or the NaN S.1..1 (e4m3-like): the first non-finite
    }
  }
  return set;
}

std::string name_of(FloatFormat f) { return hg::describe_format(f); }

}  // namespace

TEST_CASE("format presets: bias, range and specials match the IEEE and OCP tables", "[precision][float_format]") {
  // Expected numbers typed from the sources (microsoft/microxcaling @7bc4195
  // mx/formats.py emax and max_norm; OFP8 tables; NVIDIA's TF32 = 8 exponent, 10 mantissa bits).
  struct Row {
    FloatFormat format;
    const char* name;
    int bias, emax;
    double max, min_normal, min_subnormal;
    bool inf, nan;
  };
  const Row rows[] = {
      {hg::formats::f16, "f16", 15, 15, 65504, 0x1p-14, 0x1p-24, true, true},
      {hg::formats::bf16, "bf16", 127, 127, 0x1.FEp127, 0x1p-126, 0x1p-133, true, true},
      {hg::formats::tf32, "tf32", 127, 127, 0x1.FFCp127, 0x1p-126, 0x1p-136, true, true},
      {hg::formats::e4m3, "e4m3", 7, 8, 448, 0x1p-6, 0x1p-9, false, true},
      {hg::formats::e5m2, "e5m2", 15, 15, 57344, 0x1p-14, 0x1p-16, true, true},
      {hg::formats::e3m2, "e3m2", 3, 4, 28, 0.25, 0.0625, false, false},
      {hg::formats::e2m3, "e2m3", 1, 2, 7.5, 1, 0.125, false, false},
      {hg::formats::e2m1, "e2m1", 1, 2, 6, 1, 0.5, false, false},
  };
  for (const Row& r : rows) {
    INFO(r.name);
    CHECK(std::string(hg::format_name(r.format)) == r.name);
    CHECK(r.format.valid());
    CHECK(r.format.exponent_bias == r.bias);
    CHECK(r.format.max_exponent() == r.emax);
    CHECK(double(hg::decode(r.format, r.format.max_finite_bits())) == r.max);
    CHECK(double(hg::decode(r.format, 1u << r.format.mantissa_bits)) == r.min_normal);
    CHECK(double(hg::decode(r.format, 1)) == r.min_subnormal);
    CHECK(r.format.has_inf() == r.inf);
    CHECK(r.format.has_nan() == r.nan);
  }
  CHECK(hg::describe_format(hg::formats::e2m1) == "e2m1 (2 exponent, 1 mantissa bits, bias 1, finite only)");
  CHECK(hg::describe_format(
            {.exponent_bits = 3, .mantissa_bits = 2, .specials = Specials::kFiniteOnly, .subnormals = false}) ==
        "custom (3 exponent, 2 mantissa bits, bias 3, finite only, no subnormals)");
  // The e2m1 value list of the OCP MX spec: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
  const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (uint32_t b = 0; b < 8; ++b) {
    CHECK(double(hg::decode(hg::formats::e2m1, b)) == e2m1[b]);
    CHECK(double(hg::decode(hg::formats::e2m1, b | 8)) == -e2m1[b]);
  }
}

TEST_CASE("any format: invalid fields throw, and a finite-only format has no NaN or inf", "[precision][float_format]") {
  const FloatFormat too_wide{.exponent_bits = 5, .mantissa_bits = 16};    // fma needs products < 2^32
  const FloatFormat no_nan_room{.exponent_bits = 5, .mantissa_bits = 0};  // inf == NaN
  const FloatFormat beyond_float{.exponent_bits = 4, .mantissa_bits = 3, .exponent_bias = -120};  // max 2^128+
  const FloatFormat below_float{.exponent_bits = 4, .mantissa_bits = 3, .exponent_bias = 148};    // 2^-150
  const FloatFormat no_exponent{.exponent_bits = 0, .mantissa_bits = 3};  // default bias 0, no UB
  for (const FloatFormat& f : {too_wide, no_nan_room, beyond_float, below_float, no_exponent}) {
    INFO(name_of(f));
    CHECK_FALSE(f.valid());
    CHECK_THROWS_AS(hg::encode(f, 1.0), hg::Error);
    CHECK_THROWS_AS(hg::decode(f, 1), hg::Error);
    CHECK_THROWS_AS(hg::precision::add_bits(f, 1, 1), hg::Error);
  }
  CHECK_THROWS_WITH(hg::encode(too_wide, 1.0), Catch::Contains("5 exponent, 16 mantissa bits"));

  const FloatFormat e2m1 = hg::formats::e2m1;
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(hex16(hg::encode(e2m1, inf)) == hex16(0x7));  // +max: nothing else to become
  CHECK(hex16(hg::encode(e2m1, -inf)) == hex16(0xF));
  CHECK(hex16(hg::encode(e2m1, 7.0)) == hex16(0x7));  // overflow clamps without saturate
  CHECK(hex16(hg::encode(e2m1, 1e30, {.mode = Rounding::kUp})) == hex16(0x7));
  CHECK_THROWS_AS(hg::encode(e2m1, std::nan("")), hg::Error);
  CHECK_THROWS_WITH(hg::encode(e2m1, std::nan("")), Catch::Contains("e2m1") && Catch::Contains("no NaN"));
  // 0 / 0 and sqrt(-1) have no result; x / 0 is the infinite result, clamped to max.
  CHECK_THROWS_AS(hg::precision::div_bits(e2m1, 0, 0), hg::Error);
  CHECK_THROWS_AS(hg::precision::sqrt_bits(e2m1, 0xA), hg::Error);
  CHECK(hex16(hg::precision::div_bits(e2m1, 0x2, 0x0)) == hex16(0x7));
  CHECK(hex16(hg::precision::div_bits(e2m1, 0xA, 0x0)) == hex16(0xF));
  // The template form is the same code: e2m1 as a template argument.
  CHECK(hg::precision::mul_bits<hg::formats::e2m1>(0x5, 0x5) == hg::precision::mul_bits(e2m1, 0x5, 0x5));
  static_assert(hg::encode<hg::formats::e2m1>(2.5) == 0x4);  // tie 2 | 3 -> even mantissa: 2
  static_assert(hg::decode<hg::formats::e3m2>(0x1F) == 28.0f);
}

TEST_CASE("tf32 encode agrees with the f32 bit trick on random and boundary inputs", "[precision][float_format]") {
  // tf32 is f32's top 19 bits: RNE adds 0xFFF plus the last kept bit (bit 13) and truncates; toward
  // zero truncates. Both are exact for every finite f32 (a carry into the exponent is the
  // correct next binade, up to inf). Independent of round_exact.
  std::mt19937 rng(20261201);
  std::vector<uint32_t> inputs = {0x00000000, 0x00001000, 0x00001001, 0x00003000, 0x3F801000, 0x3F803000,
                                  0x3F802FFF, 0x7F7FFFFF, 0x7F7FEFFF, 0x7F7FF000, 0x00800000, 0x007FFFFF};
  for (int i = 0; i < 200000; ++i) inputs.push_back(uint32_t(rng()));
  int mismatches = 0;
  for (uint32_t bits : inputs) {
    for (const uint32_t sign : {0u, 0x80000000u}) {
      const uint32_t x = (bits & 0x7FFFFFFF) | sign;
      if ((x & 0x7F800000) == 0x7F800000) continue;  // inf and NaN: checked elsewhere
      const float value = std::bit_cast<float>(x);
      const uint32_t nearest = (x + 0xFFF + ((x >> 13) & 1)) >> 13;
      const uint32_t truncated = x >> 13;
      const uint32_t got_nearest = hg::encode(hg::formats::tf32, value);
      const uint32_t got_truncated = hg::encode(hg::formats::tf32, value, {.mode = Rounding::kTowardZero});
      if (got_nearest != nearest || got_truncated != truncated) {
        if (++mismatches <= 5) FAIL_CHECK(hexfloat(value) << ": nearest " << got_nearest << " vs " << nearest);
      }
    }
  }
  CHECK(mismatches == 0);
  // Decoding puts the 19 bits back on top of f32's.
  CHECK(std::bit_cast<uint32_t>(hg::decode(hg::formats::tf32, 0x3F800000u >> 13)) == 0x3F800000u);
}

TEST_CASE("exhaustive: any format, every encoding decodes to its definition and re-encodes to itself",
          "[precision][float_format][exhaustive]") {
  for (const FloatFormat& f : kSwept) {
    INFO(name_of(f));
    int mismatches = 0;
    for (uint32_t bits = 0; bits < (1u << f.storage_bits()); ++bits) {
      const double want = definition_value(f, bits);
      const float got = hg::decode(f, bits);
      const bool ok =
          std::isnan(want) ? std::isnan(got) : double(got) == want && std::signbit(got) == std::signbit(want);
      if (!ok && ++mismatches <= 5) FAIL_CHECK(hex16(bits) << " decodes to " << got << ", want " << want);
      if (!std::isfinite(want)) continue;
      const bool canonical =
          f.subnormals || ((bits >> f.mantissa_bits) & f.exponent_field_max()) != 0 || (bits & f.mantissa_mask()) == 0;
      // Without subnormals field-0 encodings are zeros and re-encode as the canonical zero.
      const uint32_t back = hg::encode(f, got);
      const uint32_t want_back = canonical ? bits : bits & f.sign_mask();
      if (back != want_back && ++mismatches <= 5) FAIL_CHECK(hex16(bits) << " re-encodes as " << hex16(back));
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("exhaustive: any format, f32 inputs around every value round as onto the value set in 5 modes",
          "[precision][float_format][exhaustive]") {
  // Inputs: every value, every midpoint between neighbours (and the midpoint towards the
  // overflow point above max), each also one f32 ulp above and below; far beyond max; both signs.
  for (const FloatFormat& f : kSwept) {
    INFO(name_of(f));
    const ValueSet set = value_set(f);
    std::vector<double> anchors;
    const size_t n = set.values.size();
    for (size_t i = 0; i < n; ++i) {
      anchors.push_back(set.values[i]);
      const double next = i + 1 < n ? set.values[i + 1] : set.values[i] + (set.values[i] - set.values[i - 1]);
      anchors.push_back((set.values[i] + next) / 2);
    }
    if (set.values[n - 1] < 0x1p125) anchors.push_back(std::ldexp(set.values[n - 1], 2));
    anchors.push_back(0x1p127);
    std::vector<float> inputs;
    for (const double a : anchors) {
      const float x = float(a);
      REQUIRE(double(x) == a);  // every anchor is a float for these formats
      for (const float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, std::numeric_limits<float>::infinity())}) {
        inputs.push_back(y);
        inputs.push_back(-y);
      }
    }
    int mismatches = 0;
    for (int m = 0; m < 5; ++m) {
      for (const bool saturate : {false, true}) {
        for (const bool flush : {false, true}) {
          const RoundingOptions options{.mode = kModes[m], .saturate = saturate, .flush_subnormals = flush};
          for (const float x : inputs) {
            const uint32_t want = hg::precision::oracle::value_set_round(set, x, 1.0, kExactModes[m], saturate, flush);
            const uint32_t got = hg::encode(f, x, options);
            if (got != want && ++mismatches <= 5) {
              FAIL_CHECK(hexfloat(x) << " mode " << m << " saturate " << saturate << " flush " << flush << ": got "
                                     << hex16(got) << ", want " << hex16(want));
            }
          }
        }
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("exhaustive: small formats, + - * / of all pairs in 5 modes against exact rounding",
          "[precision][arithmetic][exhaustive]") {
  // The exact result as num / den: the sum, difference or product of two of these values is
  // exact in double (at most 12 significant bits), and a quotient is a / b with den = |b|.
  const FloatFormat formats[] = {
      hg::formats::e2m1,
      hg::formats::e3m2,
      hg::formats::e2m3,
      {.exponent_bits = 3, .mantissa_bits = 2, .specials = Specials::kFiniteOnly, .subnormals = false}};
  for (const FloatFormat& f : formats) {
    INFO(name_of(f));
    const ValueSet set = value_set(f);
    int mismatches = 0;
    auto check = [&](const char* op, uint32_t a, uint32_t b, uint32_t got, uint32_t want) {
      if (got != want && ++mismatches <= 8) {
        FAIL_CHECK(hex16(a) << ' ' << op << ' ' << hex16(b) << ": got " << hex16(got) << ", want " << hex16(want));
      }
    };
    const uint32_t count = 1u << f.storage_bits();
    for (int m = 0; m < 5; ++m) {
      const RoundingOptions options{.mode = kModes[m]};
      for (uint32_t a = 0; a < count; ++a) {
        for (uint32_t b = 0; b < count; ++b) {
          const double x = definition_value(f, a), y = definition_value(f, b);
          // x + t for t = y or -y; IEEE 754 6.3 for an exact zero: two zeros keep their common
          // sign (-0 in kDown if either is -0), a cancellation is +0 (-0 in kDown).
          auto sum_bits = [&](double t) {
            const double s = x + t;
            if (s != 0) return hg::precision::oracle::value_set_round(set, s, 1.0, kExactModes[m]);
            const bool down = kModes[m] == Rounding::kDown;
            const bool negative = x == 0 && t == 0
                                      ? (down ? std::signbit(x) || std::signbit(t) : std::signbit(x) && std::signbit(t))
                                      : down;
            return negative ? set.sign_mask : 0u;
          };
          check("+", a, b, hg::precision::add_bits(f, a, b, options), sum_bits(y));
          check("-", a, b, hg::precision::sub_bits(f, a, b, options), sum_bits(-y));
          check("*", a, b, hg::precision::mul_bits(f, a, b, options),
                hg::precision::oracle::value_set_round(set, x * y, 1.0, kExactModes[m]));
          if (y != 0) {
            const uint32_t q =
                hg::precision::oracle::value_set_round(set, std::signbit(y) ? -x : x, std::fabs(y), kExactModes[m]);
            check("/", a, b, hg::precision::div_bits(f, a, b, options), q);
          }
        }
      }
    }
    CHECK(mismatches == 0);
  }
}
