// Tests for halfgrad/precision/convert.h and the convert-inl.h helpers: on every compiled Highway target,
// encode/decode/round_to equal the scalar core encode<F>/decode<F> bit for bit (every format,
// rounding mode, saturate and flush, tails); stochastic rounding is reproducible and unbiased;
// [exhaustive] sweeps all 2^32 floats against F16C and the scalar core. This file is compiled
// once per target (Highway's foreach_target) so the inline helpers run with full and partial
// vectors; the test cases themselves are in the HWY_ONCE part.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/precision/test_convert.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "halfgrad/precision/convert-inl.h"

// ------------------------------ Per-target drivers for the convert-inl.h helpers
HWY_BEFORE_NAMESPACE();
namespace hg_test::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace hp = hg::precision::HWY_NAMESPACE;
using hg::precision::FloatFormat;

// in (n, a multiple of 16) -> RNE bits of F via DemoteF32To<F>, vector by vector with tag df.
template <FloatFormat F, class DF>
void DemoteWith(DF df, const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; i += hn::Lanes(df)) {
    const auto narrow = hp::DemoteF32To<F>(df, hn::LoadU(df, in + i));
    const hn::RebindToUnsigned<DF> du;
    hn::StoreU(
        hn::DemoteTo(hn::Rebind<uint16_t, DF>(), hn::BitCast(hn::RebindToSigned<DF>(), hn::PromoteTo(du, narrow))),
        hn::Rebind<uint16_t, DF>(), out + i);
  }
}

// in: bit patterns (n, a multiple of 16) -> f32 via PromoteToF32<F> with tag df.
template <FloatFormat F, class DF>
void PromoteWith(DF df, const uint16_t* in, size_t n, float* out) {
  using TN = std::conditional_t<F.storage_bits() <= 8, uint8_t, uint16_t>;
  const hn::Rebind<TN, DF> dn;
  std::vector<TN> narrow(in, in + n);  // uint16_t -> uint8_t for fp8 (values fit)
  for (size_t i = 0; i < n; i += hn::Lanes(df)) {
    hn::StoreU(hp::PromoteToF32<F>(df, hn::LoadU(dn, narrow.data() + i)), df, out + i);
  }
}

// The named f16/bf16 helpers: the same results as the format-generic ones they wrap, checked
// here so a broken alias cannot hide.
template <class DF>
bool NamedHelpersAgree(DF df, const float* in, size_t n) {
  const hn::Rebind<uint16_t, DF> du16;
  for (size_t i = 0; i < n; i += hn::Lanes(df)) {
    const auto v = hn::LoadU(df, in + i);
    const auto h = hp::DemoteF32ToF16(df, v);
    const auto b = hp::DemoteF32ToBF16(df, v);
    if (!hn::AllTrue(du16, hn::Eq(h, hp::DemoteF32To<hg::precision::kBinary16>(df, v)))) return false;
    if (!hn::AllTrue(du16, hn::Eq(b, hp::DemoteF32To<hg::precision::kBFloat16>(df, v)))) return false;
    const hn::RebindToUnsigned<DF> du;
    const auto hf = hn::BitCast(du, hp::PromoteF16ToF32(df, h));
    const auto bf = hn::BitCast(du, hp::PromoteBF16ToF32(df, b));
    if (!hn::AllTrue(du, hn::Eq(hf, hn::BitCast(du, hp::PromoteToF32<hg::precision::kBinary16>(df, h))))) return false;
    if (!hn::AllTrue(du, hn::Eq(bf, hn::BitCast(du, hp::PromoteToF32<hg::precision::kBFloat16>(df, b))))) return false;
  }
  return true;
}

template <FloatFormat F, class DF>
void RunFormat(DF df, const float* in, size_t n, uint16_t* bits, const uint16_t* patterns, size_t m, float* decoded) {
  DemoteWith<F>(df, in, n, bits);
  PromoteWith<F>(df, patterns, m, decoded);
}

// tag: 0 full vector, 1 at most 4 lanes (a half vector on AVX2), 2 at most 2 lanes.
template <FloatFormat F>
void RunTag(int tag, const float* in, size_t n, uint16_t* bits, const uint16_t* patterns, size_t m, float* decoded) {
  if (tag == 0) RunFormat<F>(hn::ScalableTag<float>(), in, n, bits, patterns, m, decoded);
  if (tag == 1) RunFormat<F>(hn::CappedTag<float, 4>(), in, n, bits, patterns, m, decoded);
  if (tag == 2) RunFormat<F>(hn::CappedTag<float, 2>(), in, n, bits, patterns, m, decoded);
}

// format: 0 f16, 1 bf16, 2 e4m3, 3 e5m2.
void RunHelpers(int format, int tag, const float* in, size_t n, uint16_t* bits, const uint16_t* patterns, size_t m,
                float* decoded) {
  if (format == 0) RunTag<hg::precision::kBinary16>(tag, in, n, bits, patterns, m, decoded);
  if (format == 1) RunTag<hg::precision::kBFloat16>(tag, in, n, bits, patterns, m, decoded);
  if (format == 2) RunTag<hg::precision::kE4M3>(tag, in, n, bits, patterns, m, decoded);
  if (format == 3) RunTag<hg::precision::kE5M2>(tag, in, n, bits, patterns, m, decoded);
}

bool RunNamedHelpers(const float* in, size_t n) {
  return NamedHelpersAgree(hn::ScalableTag<float>(), in, n) && NamedHelpersAgree(hn::CappedTag<float, 4>(), in, n) &&
         NamedHelpersAgree(hn::CappedTag<float, 2>(), in, n);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace hg_test::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <catch2/catch.hpp>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/convert.h"
#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/half.h"
#include "halfgrad/precision/stochastic.h"
#include "tests/precision/oracles.h"
#include "tests/sweep_stride.h"

namespace hg_test {
HWY_EXPORT(RunHelpers);
HWY_EXPORT(RunNamedHelpers);

using namespace hg::precision;

namespace {

constexpr FloatFormat kFormats[] = {kBinary16, kBFloat16, kE4M3, kE5M2};
constexpr Rounding kModes[] = {Rounding::kNearestEven, Rounding::kTowardZero, Rounding::kUp,
                               Rounding::kDown,        Rounding::kStochastic, Rounding::kNearestAway};

const char* mode_name(Rounding m) {
  switch (m) {
    case Rounding::kNearestEven:
      return "nearest_even";
    case Rounding::kTowardZero:
      return "toward_zero";
    case Rounding::kUp:
      return "up";
    case Rounding::kDown:
      return "down";
    case Rounding::kStochastic:
      return "stochastic";
    case Rounding::kNearestAway:
      return "nearest_away";
  }
  return "?";
}

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t b) { return std::bit_cast<float>(b); }

// The scalar core at run time, for any of the four formats.
uint32_t scalar_encode(FloatFormat f, float x, RoundingOptions o) {
  if (f == kBinary16) return encode<kBinary16>(double(x), o);
  if (f == kBFloat16) return encode<kBFloat16>(double(x), o);
  if (f == kE4M3) return encode<kE4M3>(double(x), o);
  return encode<kE5M2>(double(x), o);
}
float scalar_decode(FloatFormat f, uint32_t bits) {
  if (f == kBinary16) return decode<kBinary16>(bits);
  if (f == kBFloat16) return decode<kBFloat16>(bits);
  if (f == kE4M3) return decode<kE4M3>(bits);
  return decode<kE5M2>(bits);
}

// Pins Highway's dispatch to one target for its lifetime (hwy/targets.h).
struct ForceTarget {
  explicit ForceTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~ForceTarget() { hwy::SetSupportedTargetsForTest(0); }
  ForceTarget(const ForceTarget&) = delete;
  ForceTarget& operator=(const ForceTarget&) = delete;
};

// Every value of every format, the midpoints between neighbours (the ties) and the floats just
// either side of those, plus random bit patterns (NaNs, infs, subnormals included) and random
// values concentrated on the formats' ranges; then a few specials. The sanitized tree keeps every
// kSweepStride-th of the generated values (the specials all; tests/sweep_stride.h says why). The
// Release tree checks every value on all four targets.
using hg::testing::kSweepStride;

std::vector<float> test_inputs() {
  std::vector<float> v;
  auto add_format = [&](FloatFormat f) {
    const uint32_t patterns = 1u << f.storage_bits();
    for (uint32_t p = 0; p < patterns; ++p) {
      const float x = scalar_decode(f, p);
      v.push_back(x);
      const uint32_t next = p + 1;
      if (std::isfinite(x) && next < patterns && (next & ~f.sign_mask()) != 0) {
        const float y = scalar_decode(f, next);
        if (!std::isfinite(y)) continue;
        const float mid = float(0.5 * (double(x) + double(y)));  // exact: F has < 24 bits
        v.push_back(mid);
        v.push_back(std::nextafter(mid, INFINITY));
        v.push_back(std::nextafter(mid, -INFINITY));
      }
    }
  };
  for (const FloatFormat f : kFormats) add_format(f);
  std::mt19937_64 rng(20240601);
  for (int i = 0; i < (1 << 17); ++i) v.push_back(float_of(uint32_t(rng())));
  std::uniform_int_distribution<int> exponent(-30, 20);
  for (int i = 0; i < (1 << 17); ++i) {
    const uint32_t r = uint32_t(rng());
    v.push_back(std::ldexp(float(1 + (r & 0xFFFFFF)) / float(1 << 24), exponent(rng)) * ((r >> 31) ? -1.0f : 1.0f));
  }
  if (kSweepStride > 1) {
    size_t kept = 0;
    for (size_t i = 0; i < v.size(); i += kSweepStride) v[kept++] = v[i];
    v.resize(kept);
  }
  const float specials[] = {0.0f,
                            -0.0f,
                            INFINITY,
                            -INFINITY,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            float_of(0x7F800001u),
                            float_of(0xFFBFFFFFu),
                            std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max()};
  v.insert(v.end(), std::begin(specials), std::end(specials));
  return v;
}

const std::vector<float>& inputs() {
  static const std::vector<float> v = test_inputs();
  return v;
}

std::vector<RoundingOptions> all_options() {
  std::vector<RoundingOptions> out;
  for (const Rounding m : kModes) {
    for (int flags = 0; flags < 6; ++flags) {  // saturate_inf only with saturate
      out.push_back(RoundingOptions{
          .mode = m, .saturate = (flags & 1) != 0, .flush_subnormals = (flags & 2) != 0, .saturate_inf = flags >= 4});
    }
  }
  return out;
}

std::string describe(FloatFormat f, const RoundingOptions& o) {
  return std::string(format_name(f)) + " " + mode_name(o.mode) + (o.saturate ? " saturate" : "") +
         (o.flush_subnormals ? " flush_subnormals" : "") + (o.saturate_inf ? " saturate_inf" : "");
}

// Counts mismatches between got[i] and want[i]; the first few go into `report` in hex.
template <class T>
size_t compare_bits(const std::vector<T>& got, const std::vector<T>& want, const std::vector<float>& in,
                    std::string& report) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (++bad <= 5) {
      char line[160];
      std::snprintf(line, sizeof line, "  [%zu] input 0x%08x (%.9g): got 0x%08x, want 0x%08x\n", i, bits_of(in[i]),
                    double(in[i]), unsigned(got[i]), unsigned(want[i]));
      report += line;
    }
  }
  return bad;
}

constexpr uint64_t kSeed = 0x5EED;
constexpr uint64_t kOffset = 1000;

RoundingOptions with_random_bits(RoundingOptions o, uint64_t index) {
  if (o.mode == Rounding::kStochastic) o.random_bits = stochastic_bits(kSeed, index);
  return o;
}

// The scalar reference for encode of `in` at stochastic offset `offset`.
std::vector<uint32_t> reference_encode(FloatFormat f, const std::vector<float>& in, const RoundingOptions& o,
                                       uint64_t offset) {
  std::vector<uint32_t> want(in.size());
  for (size_t i = 0; i < in.size(); ++i) want[i] = scalar_encode(f, in[i], with_random_bits(o, offset + i));
  return want;
}

// The vector encode through the public API, widened to uint32_t.
std::vector<uint32_t> vector_encode(FloatFormat f, std::span<const float> in, const ConvertOptions& o) {
  std::vector<uint32_t> got(in.size());
  if (f.storage_bits() > 8) {
    std::vector<uint16_t> out(in.size());
    encode(f, in, std::span<uint16_t>(out), o);
    std::copy(out.begin(), out.end(), got.begin());
  } else {
    std::vector<uint8_t> out(in.size());
    encode(f, in, std::span<uint8_t>(out), o);
    std::copy(out.begin(), out.end(), got.begin());
  }
  return got;
}

std::vector<uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), bits_of);
  return out;
}

}  // namespace

TEST_CASE("encode and round_to equal the scalar core on every target", "[simd][convert]") {
  const std::vector<float>& in = inputs();
  for (const FloatFormat f : kFormats) {
    for (const RoundingOptions& o : all_options()) {
      const std::vector<uint32_t> want = reference_encode(f, in, o, kOffset);
      std::vector<uint32_t> want_rounded(in.size());
      for (size_t i = 0; i < in.size(); ++i) want_rounded[i] = bits_of(scalar_decode(f, want[i]));
      const ConvertOptions options{.rounding = o, .seed = kSeed, .offset = kOffset};
      for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
        ForceTarget force(target);
        INFO(hwy::TargetName(target) << " " << describe(f, o) << ", " << in.size() << " inputs");
        std::string report;
        CHECK(compare_bits(vector_encode(f, in, options), want, in, report) == 0);
        std::vector<float> rounded = in;
        round_to(f, std::span<float>(rounded), options);
        CHECK(compare_bits(float_bits(rounded), want_rounded, in, report) == 0);
        if (!report.empty()) FAIL_CHECK("encode / round_to mismatches:\n" << report);
      }
    }
  }
}

TEST_CASE("decode equals the scalar core for every bit pattern on every target", "[simd][convert]") {
  for (const FloatFormat f : kFormats) {
    const size_t count = size_t{1} << f.storage_bits();
    std::vector<float> want(count);
    for (uint32_t p = 0; p < count; ++p) want[p] = scalar_decode(f, p);
    for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
      ForceTarget force(target);
      INFO(hwy::TargetName(target) << " " << format_name(f));
      std::vector<float> got(count);
      if (f.storage_bits() > 8) {
        std::vector<uint16_t> patterns(count);
        for (uint32_t p = 0; p < count; ++p) patterns[p] = uint16_t(p);
        decode(f, std::span<const uint16_t>(patterns), std::span<float>(got));
      } else {
        std::vector<uint8_t> patterns(count);
        for (uint32_t p = 0; p < count; ++p) patterns[p] = uint8_t(p);
        decode(f, std::span<const uint8_t>(patterns), std::span<float>(got));
      }
      std::vector<float> pattern_values(count);
      for (uint32_t p = 0; p < count; ++p) pattern_values[p] = float_of(p);  // for the report
      std::string report;
      CHECK(compare_bits(float_bits(got), float_bits(want), pattern_values, report) == 0);
      if (!report.empty()) FAIL_CHECK("decode mismatches (input column = pattern):\n" << report);
    }
  }
}

TEST_CASE("tails: short and odd-length spans, unaligned starts, nothing written past the end", "[simd][convert]") {
  const std::vector<float>& in = inputs();
  const RoundingOptions stochastic{.mode = Rounding::kStochastic};
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    ForceTarget force(target);
    for (const size_t n : {0, 1, 7, 17, 67, 1000}) {
      for (const size_t start : {size_t{0}, size_t{3}}) {
        for (const FloatFormat f : kFormats) {
          for (const RoundingOptions& o : {RoundingOptions{}, stochastic}) {
            INFO(hwy::TargetName(target) << " " << describe(f, o) << " n=" << n << " start=" << start);
            const std::vector<float> src(in.begin() + 20000 + start, in.begin() + 20000 + start + n);
            const ConvertOptions options{.rounding = o, .seed = kSeed, .offset = kOffset};
            const std::vector<uint32_t> want = reference_encode(f, src, o, kOffset);
            // Encode into the middle of a sentinel-filled buffer.
            constexpr uint16_t kSentinel = 0xA5A5;
            std::vector<uint16_t> wide(n + 40, kSentinel);
            std::vector<uint8_t> narrow(n + 40, uint8_t(kSentinel));
            std::vector<uint32_t> got(n);
            if (f.storage_bits() > 8) {
              encode(f, std::span<const float>(src), std::span<uint16_t>(wide).subspan(start + 1, n), options);
              for (size_t i = 0; i < n; ++i) got[i] = wide[start + 1 + i];
            } else {
              encode(f, std::span<const float>(src), std::span<uint8_t>(narrow).subspan(start + 1, n), options);
              for (size_t i = 0; i < n; ++i) got[i] = narrow[start + 1 + i];
            }
            std::string report;
            CHECK(compare_bits(got, want, src, report) == 0);
            size_t clobbered = 0;
            for (size_t i = 0; i < n + 40; ++i) {
              if (i >= start + 1 && i < start + 1 + n) continue;
              clobbered += f.storage_bits() > 8 ? wide[i] != kSentinel : narrow[i] != uint8_t(kSentinel);
            }
            CHECK(clobbered == 0);
            // round_to in place, inside a sentinel-filled float buffer.
            std::vector<float> values(n + 40, 1234.5f);
            std::copy(src.begin(), src.end(), values.begin() + long(start + 1));
            round_to(f, std::span<float>(values).subspan(start + 1, n), options);
            std::vector<uint32_t> rounded(n), want_rounded(n);
            for (size_t i = 0; i < n; ++i) {
              rounded[i] = bits_of(values[start + 1 + i]);
              want_rounded[i] = bits_of(scalar_decode(f, want[i]));
            }
            CHECK(compare_bits(rounded, want_rounded, src, report) == 0);
            CHECK(std::count(values.begin(), values.end(), 1234.5f) == 40);
            // decode of the encoded bits.
            std::vector<float> back(n + 40, 1234.5f);
            if (f.storage_bits() > 8) {
              decode(f, std::span<const uint16_t>(wide).subspan(start + 1, n),
                     std::span<float>(back).subspan(start + 1, n));
            } else {
              decode(f, std::span<const uint8_t>(narrow).subspan(start + 1, n),
                     std::span<float>(back).subspan(start + 1, n));
            }
            std::vector<uint32_t> back_bits(n);
            for (size_t i = 0; i < n; ++i) back_bits[i] = bits_of(back[start + 1 + i]);
            CHECK(compare_bits(back_bits, want_rounded, src, report) == 0);
            CHECK(std::count(back.begin(), back.end(), 1234.5f) == 40);
            if (!report.empty()) FAIL_CHECK("tail mismatches:\n" << report);
          }
        }
      }
    }
  }
}

TEST_CASE("convert-inl.h helpers: RNE demote and exact promote, full and partial vectors", "[simd][convert]") {
  const std::vector<float>& all = inputs();
  std::vector<float> in(all.begin(), all.begin() + long(all.size() / 16 * 16));
  std::vector<uint16_t> patterns(65536);
  for (uint32_t p = 0; p < 65536; ++p) patterns[p] = uint16_t(p);
  for (int fi = 0; fi < 4; ++fi) {
    const FloatFormat f = kFormats[fi];
    const size_t m = size_t{1} << f.storage_bits();
    const std::vector<uint32_t> want = reference_encode(f, in, RoundingOptions{}, 0);
    std::vector<uint32_t> want_decoded(m);
    for (uint32_t p = 0; p < m; ++p) want_decoded[p] = bits_of(scalar_decode(f, p));
    std::vector<float> pattern_values(m);
    for (uint32_t p = 0; p < m; ++p) pattern_values[p] = float_of(p);
    for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
      ForceTarget force(target);
      for (int tag = 0; tag < 3; ++tag) {
        INFO(hwy::TargetName(target) << " " << format_name(f) << " tag "
                                     << (tag == 0   ? "full"
                                         : tag == 1 ? "<=4 lanes"
                                                    : "<=2 lanes"));
        std::vector<uint16_t> bits(in.size());
        std::vector<float> decoded(m);
        HWY_DYNAMIC_DISPATCH(RunHelpers)
        (fi, tag, in.data(), in.size(), bits.data(), patterns.data(), m, decoded.data());
        std::string report;
        CHECK(compare_bits(std::vector<uint32_t>(bits.begin(), bits.end()), want, in, report) == 0);
        CHECK(compare_bits(float_bits(decoded), want_decoded, pattern_values, report) == 0);
        if (!report.empty()) FAIL_CHECK("helper mismatches:\n" << report);
      }
      if (fi == 0) CHECK(HWY_DYNAMIC_DISPATCH(RunNamedHelpers)(in.data(), in.size()));
    }
  }
}

TEST_CASE("size and format mismatches throw naming both", "[convert]") {
  std::vector<float> src(5);
  std::vector<uint16_t> wide(4);
  std::vector<uint8_t> narrow(5);
  try {
    encode(kBinary16, std::span<const float>(src), std::span<uint16_t>(wide));
    FAIL("no exception");
  } catch (const hg::Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find('5') != std::string::npos);
    CHECK(what.find('4') != std::string::npos);
  }
  CHECK_THROWS_AS(decode(kBinary16, std::span<const uint16_t>(wide), std::span<float>(src)), hg::Error);
  std::vector<uint16_t> wide5(5);
  CHECK_THROWS_WITH(encode(kE4M3, std::span<const float>(src), std::span<uint16_t>(wide5)),
                    Catch::Contains("e4m3") && Catch::Contains("with uint16_t storage"));
  CHECK_THROWS_AS(encode(kBinary16, std::span<const float>(src), std::span<uint8_t>(narrow)), hg::Error);
  constexpr FloatFormat kCustom{6, 9, Specials::kIeee};
  CHECK_THROWS_WITH(round_to(kCustom, std::span<float>(src)),
                    Catch::Contains("round_to") && Catch::Contains("6 exponent, 9 mantissa bits"));
  CHECK_NOTHROW(encode(kE4M3, std::span<const float>(src), std::span<uint8_t>(narrow)));
  // One value's random bits have no meaning for a span (it draws from seed and offset): an
  // error, not silently ignored.
  const ConvertOptions scalar_bits{.rounding = {.mode = Rounding::kStochastic, .random_bits = 7}};
  CHECK_THROWS_AS(encode(kE4M3, std::span<const float>(src), std::span<uint8_t>(narrow), scalar_bits), hg::Error);
  CHECK_THROWS_AS(round_to(kBinary16, std::span<float>(src), scalar_bits), hg::Error);
}

TEST_CASE("stochastic rounding: vector bits equal stochastic_bits across a 2^32 index boundary",
          "[simd][convert][stochastic]") {
  // Offsets straddling 2^32 make some lanes of one vector carry into the index's high word.
  const std::vector<float>& all = inputs();
  const std::vector<float> in(all.begin(), all.begin() + 4096);
  for (const uint64_t offset : {uint64_t{0}, (uint64_t{1} << 32) - 5, (uint64_t{7} << 32) - 3}) {
    for (const FloatFormat f : kFormats) {
      const RoundingOptions o{.mode = Rounding::kStochastic};
      std::vector<uint32_t> want(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        RoundingOptions oi = o;
        oi.random_bits = stochastic_bits(kSeed, offset + i);
        want[i] = scalar_encode(f, in[i], oi);
      }
      for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
        ForceTarget force(target);
        INFO(hwy::TargetName(target) << " " << format_name(f) << " offset " << offset);
        std::string report;
        CHECK(compare_bits(vector_encode(f, in, {.rounding = o, .seed = kSeed, .offset = offset}), want, in, report) ==
              0);
        if (!report.empty()) FAIL_CHECK(report);
      }
    }
  }
}

namespace {

// The inverse of lowbias32 (each step is invertible: xor-shifts by >= 16 are involutions, the
// one by 15 is undone by also xoring the shift by 30, and the multipliers are odd).
uint32_t inverse_lowbias32(uint32_t y) {
  auto inverse = [](uint32_t a) {  // a * inverse(a) == 1 mod 2^32, by Newton's iteration
    uint32_t x = a;
    for (int i = 0; i < 5; ++i) x *= 2 - a * x;
    return x;
  };
  y ^= y >> 16;
  y *= inverse(0x846CA68Bu);
  y ^= (y >> 15) ^ (y >> 30);
  y *= inverse(0x7FEB352Du);
  return y ^ (y >> 16);
}

// The index below 2^32 whose stochastic bits under `seed` are exactly `r`.
uint64_t index_with_bits(uint64_t seed, uint32_t r) {
  const StochasticKey key = stochastic_key(seed);
  return inverse_lowbias32(inverse_lowbias32(r) ^ key.hi) ^ key.lo;
}

}  // namespace

TEST_CASE("stochastic rounding: the decision frac32 + r >= 2^32 at extreme random bits",
          "[simd][convert][stochastic]") {
  // Random inputs almost never meet random bits within a few units of 0 or 2^32, where an
  // off-by-one in the fraction's shifts would show; choose the element's index so they do.
  std::vector<float> in;
  for (int e = -152; e <= 20; ++e) {
    for (const float m : {1.0f, 1.0f + 0x1p-23f, 1.5f, 2.0f - 0x1p-23f, 1.25f + 0x1p-20f}) {
      in.push_back(std::ldexp(m, e));
      in.push_back(-std::ldexp(m, e));
    }
  }
  const uint32_t extremes[] = {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
  for (const uint32_t r : extremes) {
    const uint64_t index = index_with_bits(kSeed, r);
    REQUIRE(stochastic_bits(kSeed, index) == r);
    const RoundingOptions o{.mode = Rounding::kStochastic, .random_bits = r};
    for (const FloatFormat f : kFormats) {
      std::vector<uint32_t> want(in.size());
      for (size_t i = 0; i < in.size(); ++i) want[i] = scalar_encode(f, in[i], o);
      for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
        ForceTarget force(target);
        INFO(hwy::TargetName(target) << " " << format_name(f) << " random bits 0x" << std::hex << r);
        std::vector<uint32_t> got(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
          got[i] = vector_encode(f, std::span<const float>(&in[i], 1),
                                 {.rounding = {.mode = Rounding::kStochastic}, .seed = kSeed, .offset = index})[0];
        }
        std::string report;
        CHECK(compare_bits(got, want, in, report) == 0);
        if (!report.empty()) FAIL_CHECK(report);
      }
    }
  }
}

TEST_CASE("stochastic rounding: identical for 1 and 2 threads, seeds matter", "[convert][stochastic]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> in(1'000'003);
  for (float& x : in) x = normal(rng);
  const ConvertOptions o{.rounding = {.mode = Rounding::kStochastic}, .seed = 42, .offset = 12345};
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<uint32_t> one = vector_encode(kBFloat16, in, o);
  omp_set_num_threads(2);
  const std::vector<uint32_t> two = vector_encode(kBFloat16, in, o);
  ConvertOptions other_seed = o;
  other_seed.seed = 43;
  const std::vector<uint32_t> three = vector_encode(kBFloat16, in, other_seed);
  omp_set_num_threads(threads);
  std::string report;
  CHECK(compare_bits(one, two, in, report) == 0);
  INFO(report);
  const size_t differ = size_t(std::inner_product(one.begin(), one.end(), three.begin(), size_t{0}, std::plus<>(),
                                                  [](uint32_t a, uint32_t b) { return size_t(a != b); }));
  // Each of these values rounds up or down with probability between 0 and 1: about half differ.
  CHECK(differ > in.size() / 4);
}

TEST_CASE("stochastic rounding is unbiased", "[convert][stochastic]") {
  constexpr size_t n = 1'000'000;
  SECTION("one value a third of an ulp above 1 (f16)") {
    // x = 1 + p ulp with p ~ 1/3. Each result is 1 + ulp with probability p' = frac32 / 2^32
    // (|p - p'| < 2^-32), so the share k/n of round-ups is Binomial(n, p')/n: standard deviation
    // sqrt(p(1-p)/n) = 4.7e-4. Bound: 6 sigma = 2.8e-3, failing by chance with probability 2e-9.
    const float ulp = std::ldexp(1.0f, -10);
    const float x = 1.0f + ulp / 3.0f;
    const double p = (double(x) - 1.0) / double(ulp);
    std::vector<float> values(n, x);
    round_to<hg::half>(std::span<float>(values), {.rounding = {.mode = Rounding::kStochastic}, .seed = 1});
    size_t up = 0;
    for (const float v : values) {
      REQUIRE((v == 1.0f || v == 1.0f + ulp));
      up += v != 1.0f;
    }
    const double share = double(up) / n;
    INFO("p = " << p << ", share rounded up = " << share);
    CHECK(std::abs(share - p) < 6.0 * std::sqrt(p * (1 - p) / n));
  }
  SECTION("random values over many binades (bf16)") {
    // e_i = (rounded - x) / ulp(x) has mean 0 and |e_i| < 1, variance p_i(1 - p_i) <= 1/4, so the
    // mean of n independent e_i has standard deviation <= 0.5/sqrt(n) = 5e-4; bound 6 sigma.
    // Nearest-even is checked alongside as a control that the statistic can see bias: rounding
    // toward zero gives mean e = -0.5 (|x| shrinks), far outside the bound.
    std::mt19937_64 rng(99);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-20, 20);
    std::vector<float> x(n);
    for (float& v : x) v = std::ldexp(mantissa(rng), exponent(rng)) * (rng() & 1 ? -1.0f : 1.0f);
    auto mean_error = [&](Rounding mode) {
      std::vector<float> r = x;
      round_to<hg::bfloat16>(std::span<float>(r), {.rounding = {.mode = mode}, .seed = 5});
      double sum = 0;
      for (size_t i = 0; i < n; ++i) {
        const double ulp = std::ldexp(1.0, std::ilogb(x[i]) - 7);
        sum += (double(r[i]) - double(x[i])) / ulp * (x[i] < 0 ? -1.0 : 1.0);  // signed toward |x|
      }
      return sum / n;
    };
    const double bound = 6.0 * 0.5 / std::sqrt(double(n));
    const double stochastic = mean_error(Rounding::kStochastic);
    const double toward_zero = mean_error(Rounding::kTowardZero);
    INFO("mean error in ulps: stochastic " << stochastic << ", toward zero " << toward_zero << ", bound " << bound);
    CHECK(std::abs(stochastic) < bound);
    CHECK(toward_zero < -0.4);
  }
}

// ------------------------------ [exhaustive]: all 2^32 floats

namespace {

// F16C's own conversion, 8 floats at a time: the oracle for f16 with nearest-even.
__attribute__((target("f16c,avx2"))) void f16c_encode(std::span<const float> in, std::span<uint16_t> out) {
  for (size_t i = 0; i < in.size(); i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(&in[i]), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&out[i]), h);
  }
}

template <FloatFormat F>
void scalar_encode_span(std::span<const float> in, std::span<uint16_t> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = uint16_t(encode<F>(double(in[i])));
}

// bf16 with nearest-even by the add-and-shift formula (tests/precision/oracles.h).
void formula_encode_bf16(std::span<const float> in, std::span<uint16_t> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = oracle::bf16_reference(std::bit_cast<uint32_t>(in[i]));
}

// encode(F, nearest-even) through the public API: the shortcut where F has one (F16C, bf16's
// add trick) ...
template <FloatFormat F>
void vector_encode_span(std::span<const float> in, std::span<uint16_t> out) {
  encode(F, in, out);
}
// ... and the general integer core, which collecting stats forces.
template <FloatFormat F>
void vector_encode_span_with_stats(std::span<const float> in, std::span<uint16_t> out) {
  NumericsStats stats;
  encode(F, in, out, {.stats = &stats});
}

using EncodeFn = void (*)(std::span<const float>, std::span<uint16_t>);
struct Candidate {
  const char* name;
  EncodeFn encode;
};

// Sweeps every float bit pattern, in chunks spread over the OpenMP threads, through `oracle` and
// each candidate, comparing bits. Returns the mismatch count; `report` gets the first few (in
// chunk order, so it does not depend on scheduling) and `seconds` the wall time.
size_t sweep_all_floats(EncodeFn oracle, const std::vector<Candidate>& candidates, std::string& report,
                        double& seconds) {
  constexpr size_t kChunk = size_t{1} << 15;  // below convert.cpp's parallel threshold: no nesting
  constexpr size_t kChunks = (size_t{1} << 32) / kChunk;
  std::vector<size_t> bad(kChunks, 0);
  std::vector<std::string> first(kChunks);
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel
  {
    std::vector<float> in(kChunk);
    std::vector<uint16_t> got(kChunk), want(kChunk);
#pragma omp for schedule(dynamic, 64)
    for (ptrdiff_t c = 0; c < ptrdiff_t(kChunks); ++c) {
      const uint32_t base = uint32_t(size_t(c) * kChunk);
      for (size_t i = 0; i < kChunk; ++i) in[i] = float_of(base + uint32_t(i));
      oracle(in, want);
      for (const Candidate& candidate : candidates) {
        candidate.encode(in, got);
        // Equal chunks (all of them, when the test passes) cost memcmp's speed; the element loop
        // below, with its count and report, held the sweep at about 1 ns a value (perf).
        if (std::memcmp(got.data(), want.data(), kChunk * sizeof(uint16_t)) == 0) continue;
        for (size_t i = 0; i < kChunk; ++i) {
          if (got[i] == want[i]) continue;
          if (bad[size_t(c)]++ == 0) {
            char line[160];
            std::snprintf(line, sizeof line, "  %s: input 0x%08x: got 0x%04x, want 0x%04x\n", candidate.name,
                          base + uint32_t(i), unsigned(got[i]), unsigned(want[i]));
            first[size_t(c)] = line;
          }
        }
      }
    }
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t total = 0;
  for (size_t c = 0; c < kChunks; ++c) {
    total += bad[c];
    if (bad[c] != 0 && report.size() < 1000) report += first[c];
  }
  return total;
}

}  // namespace

TEST_CASE("exhaustive: f16 and bf16 RNE on the best target, shortcuts and integer core, all 2^32 floats",
          "[exhaustive][simd][convert]") {
  const char* target = hwy::TargetName(hwy::SupportedAndGeneratedTargets().front());
  if (!__builtin_cpu_supports("f16c")) {
    WARN("f16 part skipped: this CPU has no F16C");
  } else {
    std::string report;
    double seconds = 0;
    const size_t bad = sweep_all_floats(f16c_encode,
                                        {{"f16 encode", vector_encode_span<kBinary16>},
                                         {"f16 encode with stats", vector_encode_span_with_stats<kBinary16>}},
                                        report, seconds);
    WARN("2^32 floats, f16 encode and encode-with-stats on "
         << target << " vs _mm256_cvtps_ph, " << omp_get_max_threads() << " threads: " << seconds << " s");
    INFO(report);
    CHECK(bad == 0);
  }
  // bf16's shortcut and its integer core against each other; the next test ties both to encode<>.
  std::string report;
  double seconds = 0;
  const size_t bad =
      sweep_all_floats(vector_encode_span<kBFloat16>,
                       {{"bf16 encode with stats", vector_encode_span_with_stats<kBFloat16>}}, report, seconds);
  WARN("2^32 floats, bf16 encode-with-stats vs encode on " << target << ", " << omp_get_max_threads()
                                                           << " threads: " << seconds << " s");
  INFO(report);
  CHECK(bad == 0);
}

// The oracles stand for the scalar core encode<F> without computing it again (about 40 s of CPU
// per format): test_half.cpp ties F16C's VCVTPS2PH, and test_bfloat16.cpp the bf16 formula, to
// encode<F> over all 2^32 floats. Without F16C, f16 is compared with encode<F> itself.
TEST_CASE("exhaustive: the integer paths (no F16C) equal the scalar core for all 2^32 floats",
          "[exhaustive][simd][convert]") {
  // SSE4 has no F16C, so f16 runs convert-inl.h's EncodeCore there; fall back to SCALAR.
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  const int64_t target = std::find(targets.begin(), targets.end(), HWY_SSE4) != targets.end() ? HWY_SSE4 : HWY_SCALAR;
  ForceTarget force(target);
  struct Sweep {
    const char* format;
    const char* oracle_name;
    EncodeFn oracle;
    std::vector<Candidate> candidates;
  };
  const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
  const Sweep sweeps[] = {
      {"f16",
       f16c ? "VCVTPS2PH" : "encode<f16>",
       f16c ? f16c_encode : scalar_encode_span<kBinary16>,
       {{"f16 encode", vector_encode_span<kBinary16>}}},
      {"bf16",
       "the formula",
       formula_encode_bf16,
       {{"bf16 encode", vector_encode_span<kBFloat16>},
        {"bf16 encode with stats", vector_encode_span_with_stats<kBFloat16>}}},
  };
  for (const Sweep& sweep : sweeps) {
    std::string report;
    double seconds = 0;
    const size_t bad = sweep_all_floats(sweep.oracle, sweep.candidates, report, seconds);
    WARN("2^32 floats, " << sweep.format << " RNE (" << sweep.candidates.size() << " path(s)) on "
                         << hwy::TargetName(target) << " vs " << sweep.oracle_name << ", " << omp_get_max_threads()
                         << " threads: " << seconds << " s");
    INFO(report);
    CHECK(bad == 0);
  }
}

}  // namespace hg_test
#endif  // HWY_ONCE
