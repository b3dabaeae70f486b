// Tests for halfgrad/precision/numerics_stats.h: the counts a cast reports on inputs whose answer is known
// exactly, the log2 histogram's bins, merging, independence from the thread count, and the
// region labels of render_histogram.
#include "halfgrad/precision/numerics_stats.h"

#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "halfgrad/precision/convert.h"
#include "halfgrad/precision/half.h"
#include "tests/float_specials.h"

namespace {

using namespace hg::precision;

using hg::testing::kInf;
using hg::testing::kNaN;

// Stats of encoding `values` to `format` (uint16_t or uint8_t storage as the format needs).
NumericsStats cast_stats(FloatFormat format, const std::vector<float>& values, RoundingOptions rounding = {}) {
  NumericsStats stats;
  const ConvertOptions options{.rounding = rounding, .stats = &stats};
  if (format.storage_bits() > 8) {
    std::vector<uint16_t> out(values.size());
    encode(format, std::span<const float>(values), std::span<uint16_t>(out), options);
  } else {
    std::vector<uint8_t> out(values.size());
    encode(format, std::span<const float>(values), std::span<uint8_t>(out), options);
  }
  return stats;
}

// The row of a rendering whose first field is `label`, or "" if there is none.
std::string row_of(const std::string& rendering, const std::string& label) {
  std::istringstream lines(rendering);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first == label) return line;
  }
  return "";
}

}  // namespace

TEST_CASE("NumericsStats: f16 counts on inputs with known answers", "[numerics_stats]") {
  // 1e-8 and -1e-9 are below half of f16's smallest subnormal 2^-24 ~ 5.96e-8: they become zero.
  // 3e-6 is below the smallest normal 2^-14 ~ 6.1e-5: subnormal. 65520 is the midpoint between
  // the max 65504 (odd mantissa) and 2^16: nearest-even rounds it up, to inf.
  const std::vector<float> values = {0.0f, 1e-8f, 3e-6f, 1.0f, 65520.0f, kInf, kNaN, -1e-9f};
  const NumericsStats stats = cast_stats(kBinary16, values);
  CHECK(stats.total() == 8);
  CHECK(stats.underflow == 2);
  CHECK(stats.subnormal == 1);
  CHECK(stats.overflow == 1);
  CHECK(stats.nan_inputs() == 1);
  CHECK(stats.inf_inputs() == 1);
  CHECK(stats.summary() == "8 values: 2 underflow, 1 subnormal, 1 overflow, 1 NaN, 1 inf");

  // round_to counts the same, and histograms the inputs before overwriting them.
  NumericsStats in_place;
  std::vector<float> copy = values;
  round_to<hg::half>(std::span<float>(copy), {.stats = &in_place});
  CHECK(in_place == stats);
  CHECK(std::isinf(copy[4]));

  // The histogram: floor(log2|x|) of each finite nonzero input.
  const Log2Histogram& h = stats.input;
  CHECK(h.zero == 1);
  CHECK(h.inf == 1);
  CHECK(h.nan == 1);
  CHECK(h.count(-27) == 1);  // 1e-8 = 1.34 * 2^-27
  CHECK(h.count(-19) == 1);  // 3e-6 = 1.57 * 2^-19
  CHECK(h.count(0) == 1);
  CHECK(h.count(15) == 1);   // 65520 = 1.9995 * 2^15
  CHECK(h.count(-30) == 1);  // 1e-9 = 1.07 * 2^-30
  CHECK(h.total() == 8);
}

TEST_CASE("NumericsStats: saturate, directed rounding, flush and e4m3 overflow", "[numerics_stats]") {
  SECTION("saturate: clamped values count as overflow, inf inputs do not") {
    const NumericsStats s = cast_stats(kBinary16, {1e6f, -70000.0f, 65504.0f, kInf}, {.saturate = true});
    CHECK(s.overflow == 2);
    CHECK(s.inf_inputs() == 1);
  }
  SECTION("toward zero: IEEE overflow iff the rounded magnitude exceeds the max") {
    // 65519 truncates to 65504 (no overflow); 65536 would need a larger exponent (overflow,
    // result 65504); the next f32 above 65504 truncates to it.
    const NumericsStats s =
        cast_stats(kBinary16, {65519.0f, 65536.0f, std::nextafter(65504.0f, kInf)}, {.mode = Rounding::kTowardZero});
    CHECK(s.overflow == 1);
    CHECK(s.underflow == 0);
  }
  SECTION("flush_subnormals: subnormal results become zeros and count as underflow") {
    const NumericsStats s = cast_stats(kBinary16, {3e-6f, -3e-6f, 1e-8f, 6.2e-5f}, {.flush_subnormals = true});
    CHECK(s.underflow == 3);
    CHECK(s.subnormal == 0);
  }
  SECTION("e4m3: finite overflow becomes NaN and counts; 464 ties down to the max 448") {
    const NumericsStats s = cast_stats(kE4M3, {448.0f, 464.0f, 470.0f, 1e4f, kInf, 0.001f, 0.0009f});
    // 2^-9 ~ 0.00195 is e4m3's smallest subnormal: 0.001 rounds up to it, 0.0009 rounds to 0.
    CHECK(s.overflow == 2);
    CHECK(s.inf_inputs() == 1);
    CHECK(s.subnormal == 1);
    CHECK(s.underflow == 1);
  }
  SECTION("bf16 has f32's range: subnormal floats stay subnormal, nothing overflows") {
    const NumericsStats s = cast_stats(kBFloat16, {1e-40f, 3e38f, std::numeric_limits<float>::denorm_min()});
    CHECK(s.subnormal == 1);  // the smallest float subnormal, 2^-149, is below bf16's 2^-133 / 2
    CHECK(s.underflow == 1);
    CHECK(s.overflow == 0);
  }
}

TEST_CASE("Log2Histogram: bins over f32's whole range", "[numerics_stats]") {
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  const Log2Histogram h = log2_histogram(
      std::vector<float>{denorm_min, 3 * denorm_min, std::numeric_limits<float>::min(),
                         std::numeric_limits<float>::max(), -0.0f, 0.75f, -1.0f, 1.5f, 2.0f, -kInf, -kNaN});
  CHECK(h.count(-149) == 1);
  CHECK(h.count(-148) == 1);  // 3 * 2^-149
  CHECK(h.count(-126) == 1);
  CHECK(h.count(127) == 1);
  CHECK(h.count(-1) == 1);
  CHECK(h.count(0) == 2);  // -1.0 and 1.5
  CHECK(h.count(1) == 1);
  CHECK(h.zero == 1);
  CHECK(h.inf == 1);
  CHECK(h.nan == 1);
  CHECK(h.total() == 11);

  Log2Histogram sum = h;
  sum.merge(h);
  CHECK(sum.count(0) == 4);
  CHECK(sum.total() == 22);
}

// A span is counted in blocks (by exponent field, two tables, a second pass for fields 0 and
// 255 when there are any: numerics_stats.cpp); add(x) for each value is the reference.
TEST_CASE("Log2Histogram: a span counts as its values added one by one", "[numerics_stats]") {
  // Every exponent field, signs, zeros, subnormals, inf and NaN: bit patterns 0x00000000 to
  // 0xFFFFFFFF in steps of 2^32 / 4099 (prime), plus the exact specials.
  std::vector<float> all;
  for (uint64_t i = 0; i < 4099; ++i) all.push_back(std::bit_cast<float>(uint32_t(i * (uint64_t{1} << 32) / 4099)));
  for (const float x : {0.0f, -0.0f, kInf, -kInf, kNaN, std::numeric_limits<float>::denorm_min()}) all.push_back(x);
  // Normal numbers only (the second pass is skipped), sizes around the block path's 512.
  std::vector<float> normal;
  for (uint32_t i = 0; i < 1025; ++i) normal.push_back(std::bit_cast<float>(0x3F800000u + i * 0x9E3779u % 0x3F000000u));
  for (const std::vector<float>* values : {&all, &normal}) {
    for (const size_t n : {size_t(511), size_t(512), size_t(513), values->size()}) {
      const std::span<const float> span(values->data(), n);
      Log2Histogram want;
      for (const float x : span) want.add(x);
      const Log2Histogram got = log2_histogram(span);
      INFO((values == &all ? "all classes" : "normal only") << ", " << n << " values");
      CHECK(got == want);
      CHECK(got.total() == n);
    }
  }
  Log2Histogram want;
  for (const float x : all) want.add(x);
  CHECK(want.zero >= 3);  // pattern 0, and the two zeros
  CHECK(want.inf == 2);
  CHECK(want.nan >= 2);
  CHECK(want.count(-149) >= 1);
  CHECK(want.count(127) >= 2);
}

TEST_CASE("NumericsStats: identical for 1 and 2 threads, equal to a scalar recount", "[numerics_stats]") {
  // Log-uniform magnitudes from 2^-40 to 2^20: plenty underflow, subnormal and overflow in f16.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> log2_magnitude(-40.0, 20.0);
  std::vector<float> values(1 << 20);
  for (float& x : values) x = float(std::exp2(log2_magnitude(rng))) * (rng() & 1 ? 1.0f : -1.0f);
  values[10] = kNaN;
  values[20] = -kInf;

  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const NumericsStats one = cast_stats(kBinary16, values);
  omp_set_num_threads(2);
  const NumericsStats two = cast_stats(kBinary16, values);
  omp_set_num_threads(threads);
  CHECK(one == two);

  // Recount with the scalar core: with nearest-even, overflow is exactly "finite became inf".
  NumericsStats want;
  want.input = log2_histogram(values);
  for (const float x : values) {
    const uint32_t bits = encode<kBinary16>(double(x));
    const uint32_t magnitude = bits & 0x7FFF;
    want.underflow += magnitude == 0 && x != 0;
    want.subnormal += magnitude != 0 && magnitude < 0x400;
    want.overflow += std::isfinite(x) && magnitude == 0x7C00;
  }
  CHECK(one.underflow == want.underflow);
  CHECK(one.subnormal == want.subnormal);
  CHECK(one.overflow == want.overflow);
  CHECK(one == want);
  CHECK(want.underflow > 1000);
  CHECK(want.subnormal > 1000);
  CHECK(want.overflow > 1000);

  // Stats accumulate across casts.
  NumericsStats twice = one;
  twice.merge(one);
  CHECK(twice.total() == 2 * values.size());
  CHECK(twice.overflow == 2 * one.overflow);
}

TEST_CASE("region_label and render_histogram mark the target's regions per row", "[numerics_stats]") {
  // f16: max 65504 (exponent 15), smallest normal 2^-14, smallest subnormal 2^-24.
  CHECK(region_label(kBinary16, 16) == "overflow -> inf");
  CHECK(region_label(kBinary16, 15) == "normal / overflow -> inf");
  CHECK(region_label(kBinary16, -14) == "normal");
  CHECK(region_label(kBinary16, -15) == "subnormal");
  CHECK(region_label(kBinary16, -25) == "subnormal");  // (2^-25, 2^-24) rounds up to 2^-24
  CHECK(region_label(kBinary16, -26) == "underflow -> 0");
  CHECK(region_label(kBinary16, -20, {.flush_subnormals = true}) == "flushed -> 0");
  CHECK(region_label(kBinary16, 16, {.saturate = true}) == "overflow -> max");
  // e4m3: max 448 = 1.75 * 2^8, no inf.
  CHECK(region_label(kE4M3, 9) == "overflow -> NaN");
  CHECK(region_label(kE4M3, 8) == "normal / overflow -> NaN");
  CHECK(region_label(kE4M3, -6) == "normal");
  CHECK(region_label(kE4M3, -9) == "subnormal");
  CHECK(region_label(kE4M3, -11) == "underflow -> 0");
  // bf16: f32's range, 7 mantissa bits.
  CHECK(region_label(kBFloat16, 127) == "normal / overflow -> inf");
  CHECK(region_label(kBFloat16, -133) == "subnormal");
  CHECK(region_label(kBFloat16, -135) == "underflow -> 0");

  const std::vector<float> values = {1e5f, 2e5f, 65520.0f, 1.0f, 1.5f, 3e-6f, 1e-8f, 0.0f, kNaN, -kInf};
  const std::string text = render_histogram(log2_histogram(values), kBinary16, {.bar_width = 20});
  INFO(text);
  CHECK(row_of(text, "log2|x|").find("f16") != std::string::npos);
  const std::string r16 = row_of(text, "16");  // 1e5 = 1.53 * 2^16
  const std::string r17 = row_of(text, "17");  // 2e5
  const std::string r15 = row_of(text, "15");
  const std::string r0 = row_of(text, "0");
  const std::string r19 = row_of(text, "-19");
  const std::string r27 = row_of(text, "-27");
  CHECK(r16.find("overflow -> inf") != std::string::npos);
  CHECK(r17.find("overflow -> inf") != std::string::npos);
  CHECK(r15.find("normal / overflow -> inf") != std::string::npos);
  CHECK(r0.find("normal") != std::string::npos);
  CHECK(r0.find("overflow") == std::string::npos);
  CHECK(r19.find("subnormal") != std::string::npos);
  CHECK(r27.find("underflow -> 0") != std::string::npos);
  CHECK(row_of(text, "zero").find("zero") != std::string::npos);
  CHECK(row_of(text, "inf").find("inf") != std::string::npos);
  CHECK(row_of(text, "NaN").find("NaN") != std::string::npos);
  // Shares and bars: row 0 holds 2 of 10 values = 20% = 4 of 20 '#'; the others 10% = 2 '#'.
  CHECK(r0.find("20.0%") != std::string::npos);
  CHECK(std::count(r0.begin(), r0.end(), '#') == 4);
  CHECK(std::count(r16.begin(), r16.end(), '#') == 2);
  // Empty rows are left out unless asked for, in a chosen range.
  CHECK(row_of(text, "5").empty());
  const std::string ranged =
      render_histogram(log2_histogram(values), kBinary16, {.min_exponent = -2, .max_exponent = 2, .show_empty = true});
  CHECK(row_of(ranged, "2").find("normal") != std::string::npos);
  CHECK(row_of(ranged, "-2").find("0.0%") != std::string::npos);
  CHECK(row_of(ranged, "16").empty());
  CHECK(row_of(ranged, "zero").find("10.0%") != std::string::npos);
}
