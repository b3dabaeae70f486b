// Arithmetic under every rounding option (halfgrad/precision/arithmetic.h; hg::add, sub, mul, div, sqrt,
// fma, convert): each result against the independent integer oracle of oracles.h (operands as
// exact integer significands and exponents, the exact result rounded by exact_round, which knows
// nothing of float_format.h). Random pairs of all four formats x 5 deterministic modes x
// saturate x flush; all fp8 pairs, all sqrt inputs and all cross-format conversions; the cases
// of issue #19 by hand (1 + 2^-24 rounded up, ties, overflow per mode, flush, saturate);
// stochastic rounding's decision for given random bits and its mean; and in `[exhaustive]` every
// f16 pair with one operand in [1, 2).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "halfgrad/precision/arithmetic.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/float8.h"
#include "halfgrad/precision/half.h"
#include "tests/precision/oracles.h"
#include "tests/precision/sweep_modes.h"
#include "tests/sweep_stride.h"

namespace {

using hg::half;
using hg::Rounding;
using hg::RoundingOptions;
using hg::precision::FloatFormat;
using hg::precision::kBFloat16;
using hg::precision::kBinary16;
using hg::precision::kE4M3;
using hg::precision::kE5M2;
using hg::precision::oracle::exact_round;
using hg::precision::oracle::exact_scaled;
using hg::precision::oracle::exact_sum;
using hg::precision::oracle::ExactFormat;
using hg::precision::oracle::ExactMode;
using hg::precision::oracle::hex16;
using hg::precision::oracle::ScaledInt;
using hg::precision::oracle::sticky_quotient;
using hg::precision::oracle::u128;

using hg::testing::kAdd;
using hg::testing::kDiv;
using hg::testing::kExactModes;
using hg::testing::kModeCount;
using hg::testing::kModeNames;
using hg::testing::kModes;
using hg::testing::kMul;
using hg::testing::kOpCount;
using hg::testing::kOpNames;
using hg::testing::kSub;

bool negative_bit(uint32_t bits, const ExactFormat& f) {
  return ((bits >> (f.precision - 1 + f.exponent_bits)) & 1) != 0;
}
uint32_t all_ones_field(const ExactFormat& f) { return (1u << f.exponent_bits) - 1; }
bool is_nan(uint32_t bits, const ExactFormat& f) {
  const uint32_t field = (bits >> (f.precision - 1)) & all_ones_field(f),
                 mantissa = bits & ((1u << (f.precision - 1)) - 1);
  return field == all_ones_field(f) && (f.has_inf ? mantissa != 0 : mantissa == (1u << (f.precision - 1)) - 1);
}
bool is_finite(uint32_t bits, const ExactFormat& f) {
  return ((bits >> (f.precision - 1)) & all_ones_field(f)) != all_ones_field(f) || (!f.has_inf && !is_nan(bits, f));
}

// The rounded a op b for finite a, b (b nonzero for /), from exact integers. Zero results
// (IEEE 754 6.3): x * y and x / y carry the xor of the signs; an exact zero sum is -0 if both
// terms are -0 (in kDown: if either is), +0 otherwise (in kDown: -0 for any cancellation).
uint32_t oracle_op(int op, uint32_t a, uint32_t b, const ExactFormat& f, ExactMode mode, bool saturate, bool flush) {
  const ScaledInt x = exact_scaled(a, f), y = exact_scaled(b, f);
  const bool xn = negative_bit(a, f), yn = negative_bit(b, f) != (op == kSub);
  const bool down = mode == ExactMode::kDown;
  switch (op) {
    case kAdd:
    case kSub: {
      const bool both_zero = x.significand == 0 && y.significand == 0;
      const bool zero_negative = both_zero ? (down ? xn || yn : xn && yn) : down;
      return exact_sum(x, {op == kSub ? -y.significand : y.significand, y.exponent}, f, zero_negative, mode, saturate,
                       flush);
    }
    case kMul: {
      const __int128 p = __int128(x.significand) * y.significand;
      return exact_round(xn != yn, u128(p < 0 ? -p : p), x.exponent + y.exponent, f, mode, saturate, flush);
    }
    default:
      if (x.significand == 0) return exact_round(xn != yn, 0, 0, f);
      return exact_round(xn != yn, sticky_quotient(x.significand, y.significand), x.exponent - y.exponent - 64, f, mode,
                         saturate, flush);
  }
}

template <FloatFormat F>
uint32_t library_op(int op, uint32_t a, uint32_t b, const RoundingOptions& o) {
  switch (op) {
    case kAdd:
      return hg::precision::add_bits<F>(a, b, o);
    case kSub:
      return hg::precision::sub_bits<F>(a, b, o);
    case kMul:
      return hg::precision::mul_bits<F>(a, b, o);
    default:
      return hg::precision::div_bits<F>(a, b, o);
  }
}

struct Mismatches {
  uint64_t count = 0;
  std::string first;
  void record(const std::string& what) {
    if (count++ == 0) first = what;
  }
};

std::string describe_case(const char* format, int op, uint32_t a, uint32_t b, int mode, bool saturate, bool flush,
                          uint32_t got, uint32_t want) {
  std::ostringstream os;
  os << format << ": " << hex16(a) << " " << kOpNames[op] << " " << hex16(b) << " " << kModeNames[mode]
     << (saturate ? " saturate" : "") << (flush ? " flush" : "") << " gave " << hex16(got) << ", oracle "
     << hex16(want);
  return os.str();
}

// a op b under all 5 modes x saturate x flush, against the oracle; NaN results only need be NaN.
template <FloatFormat F>
void check_pair(const char* name, const ExactFormat& f, int op, uint32_t a, uint32_t b, Mismatches& m) {
  const bool finite = is_finite(a, f) && is_finite(b, f) && !(op == kDiv && exact_scaled(b, f).significand == 0);
  for (int mode = 0; mode < kModeCount; ++mode) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool saturate = (flags & 1) != 0, flush = (flags & 2) != 0;
      const uint32_t got =
          library_op<F>(op, a, b, {.mode = kModes[mode], .saturate = saturate, .flush_subnormals = flush});
      if (finite) {
        const uint32_t want = oracle_op(op, a, b, f, kExactModes[mode], saturate, flush);
        if (got != want) m.record(describe_case(name, op, a, b, mode, saturate, flush, got, want));
      } else if ((is_nan(a, f) || is_nan(b, f)) && !is_nan(got, f)) {
        m.record(describe_case(name, op, a, b, mode, saturate, flush, got, 0));
      }
    }
  }
}

template <FloatFormat F>
uint64_t random_pairs(const char* name, const ExactFormat& f, uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  const uint32_t mask = (1u << F.storage_bits()) - 1;
  Mismatches m;
  for (int k = 0; k < count; ++k) {
    const uint32_t a = uint32_t(rng()) & mask;
    uint32_t b = uint32_t(rng()) & mask;
    if (k % 2 == 1) b = (a + uint32_t(rng() % 65) - 32) & mask;  // close: cancellation, ties near 1
    if (k % 4 == 3) b ^= F.sign_mask();
    for (int op = 0; op < kOpCount; ++op) check_pair<F>(name, f, op, a, b, m);
  }
  INFO(m.first);
  CHECK(m.count == 0);
  return m.count;
}

}  // namespace

TEST_CASE("add sub mul div equal the exact oracle in every mode with saturate and flush, 4 formats",
          "[precision][arithmetic]") {
  using namespace hg::precision::oracle;
  constexpr int kStride = int(hg::testing::kSweepStride);  // a sample in the sanitized tree
  random_pairs<kBinary16>("f16", kExactF16, 1, 60000 / kStride);
  random_pairs<kBFloat16>("bf16", kExactBF16, 2, 60000 / kStride);
  random_pairs<kE5M2>("e5m2", kExactE5M2, 3, 20000 / kStride);
  random_pairs<kE4M3>("e4m3", kExactE4M3, 4, 20000 / kStride);
}

TEST_CASE("fp8 add sub mul div: all 65536 pairs in every mode with saturate and flush", "[precision][arithmetic]") {
  using namespace hg::precision::oracle;
  Mismatches e4, e5;
  // Every a in the Release tree; every kSweepStride-th in the sanitized one (sweep_stride.h).
  for (uint32_t a = 0; a < 256; a += uint32_t(hg::testing::kSweepStride)) {
    for (uint32_t b = 0; b < 256; ++b) {
      for (int op = 0; op < kOpCount; ++op) {
        check_pair<kE4M3>("e4m3", kExactE4M3, op, a, b, e4);
        check_pair<kE5M2>("e5m2", kExactE5M2, op, a, b, e5);
      }
    }
  }
  INFO(e4.first << " | " << e5.first);
  CHECK(e4.count == 0);
  CHECK(e5.count == 0);
}

namespace {

// a * b + c for finite operands, exact: the product as one ScaledInt, then exact_sum (whose
// replacement of a far-below term by a sticky unit holds for a product plus a value, see
// oracles.h). Zero results as for sums, the product's sign being the xor.
uint32_t oracle_fma(uint32_t a, uint32_t b, uint32_t c, const ExactFormat& f, ExactMode mode, bool saturate,
                    bool flush) {
  const ScaledInt x = exact_scaled(a, f), y = exact_scaled(b, f), z = exact_scaled(c, f);
  const ScaledInt product{x.significand * y.significand, x.exponent + y.exponent};
  const bool pn = negative_bit(a, f) != negative_bit(b, f), zn = negative_bit(c, f);
  const bool down = mode == ExactMode::kDown;
  const bool both_zero = product.significand == 0 && z.significand == 0;
  return exact_sum(product, z, f, both_zero ? (down ? pn || zn : pn && zn) : down, mode, saturate, flush);
}

template <FloatFormat F>
void random_fma(const char* name, const ExactFormat& f, uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  const uint32_t mask = (1u << F.storage_bits()) - 1;
  uint64_t wrong = 0;
  std::string first;
  for (int k = 0; k < count; ++k) {
    uint32_t a, b, c;
    do a = uint32_t(rng()) & mask, b = uint32_t(rng()) & mask, c = uint32_t(rng()) & mask;
    while (!is_finite(a, f) || !is_finite(b, f) || !is_finite(c, f));
    if (k % 2 == 1) {  // c near -a*b: cancellation, the product's low bits decide
      const uint32_t rounded = hg::precision::mul_bits<F>(a, b);
      const uint32_t near = ((rounded + uint32_t(rng() % 5) - 2) & mask) ^ F.sign_mask();
      if (is_finite(near, f)) c = near;
    }
    for (int mode = 0; mode < kModeCount; ++mode) {
      for (int flags = 0; flags < 4; ++flags) {
        const bool saturate = (flags & 1) != 0, flush = (flags & 2) != 0;
        const uint32_t got = hg::precision::fma_bits<F>(
            a, b, c, {.mode = kModes[mode], .saturate = saturate, .flush_subnormals = flush});
        const uint32_t want = oracle_fma(a, b, c, f, kExactModes[mode], saturate, flush);
        if (got != want && wrong++ == 0) {
          first = std::string(name) + " fma(" + std::to_string(a) + ", " + std::to_string(b) + ", " +
                  std::to_string(c) + ") " + kModeNames[mode] + ": got " + std::to_string(got) + ", oracle " +
                  std::to_string(want);
        }
      }
    }
  }
  INFO(first);
  CHECK(wrong == 0);
}

// floor(sqrt(n)) by the digit-by-digit method (an algorithm unlike the library's Newton step).
uint64_t isqrt_digits(u128 n) {
  u128 root = 0, bit = u128{1} << 126;
  while (bit > n) bit >>= 2;
  while (bit != 0) {
    if (n >= root + bit) {
      n -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
    bit >>= 2;
  }
  return uint64_t(root);
}

// sqrt of a finite positive value: x = s * 2^e with e - t even and s * 2^t ~ 2^100; the root
// r (~50 bits) with one more bit that is the sticky (round to odd, exact for every rounding of a
// p <= 11 bit result: the quantum is 2^36 or more units).
uint32_t oracle_sqrt(uint32_t a, const ExactFormat& f, ExactMode mode, bool flush) {
  const ScaledInt x = exact_scaled(a, f);
  int t = 100 - int(std::bit_width(uint64_t(x.significand)));
  if (((x.exponent - t) % 2 + 2) % 2 != 0) ++t;
  const u128 n = u128(x.significand) << t;
  const uint64_t r = isqrt_digits(n);
  const bool sticky = u128(r) * r != n;
  return exact_round(false, (u128(r) << 1) | (sticky ? 1 : 0), (x.exponent - t) / 2 - 1, f, mode, false, flush);
}

template <FloatFormat F>
uint64_t all_sqrt(const ExactFormat& f) {
  uint64_t wrong = 0;
  for (uint32_t a = 0; a < (1u << F.storage_bits()); ++a) {
    if (!is_finite(a, f) || negative_bit(a, f) || exact_scaled(a, f).significand == 0) continue;
    for (int mode = 0; mode < kModeCount; ++mode) {
      for (const bool flush : {false, true}) {
        const uint32_t got = hg::precision::sqrt_bits<F>(a, {.mode = kModes[mode], .flush_subnormals = flush});
        const uint32_t want = oracle_sqrt(a, f, kExactModes[mode], flush);
        if (got != want && wrong++ == 0) {
          INFO("sqrt(" << hex16(a) << ") " << kModeNames[mode] << (flush ? " flush" : ""));
          CHECK(hex16(got) == hex16(want));
        }
      }
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("fma equals the exact oracle in every mode with saturate and flush, 4 formats", "[precision][arithmetic]") {
  using namespace hg::precision::oracle;
  random_fma<kBinary16>("f16", kExactF16, 5, 40000);
  random_fma<kBFloat16>("bf16", kExactBF16, 6, 40000);
  random_fma<kE5M2>("e5m2", kExactE5M2, 7, 20000);
  random_fma<kE4M3>("e4m3", kExactE4M3, 8, 20000);
}

TEST_CASE("sqrt of every positive finite value of 4 formats in every mode, with and without flush",
          "[precision][arithmetic]") {
  using namespace hg::precision::oracle;
  CHECK(all_sqrt<kBinary16>(kExactF16) == 0);
  CHECK(all_sqrt<kBFloat16>(kExactBF16) == 0);
  CHECK(all_sqrt<kE5M2>(kExactE5M2) == 0);
  CHECK(all_sqrt<kE4M3>(kExactE4M3) == 0);
  // The oracle by hand: sqrt(2) = 1.0110101000001001111...b; f16 keeps 10 fraction bits
  // 0110101000 (0x3DA8), the rest 001111... is below half: nearest and down give 0x3DA8, up 0x3DA9.
  CHECK(hex16(oracle_sqrt(0x4000, kExactF16, ExactMode::kNearestEven, false)) == hex16(0x3DA8));
  CHECK(hex16(oracle_sqrt(0x4000, kExactF16, ExactMode::kUp, false)) == hex16(0x3DA9));
  CHECK(hex16(hg::sqrt(half(2), {.mode = Rounding::kUp}).bits()) == hex16(0x3DA9));
}

namespace {

template <FloatFormat From, FloatFormat To>
uint64_t all_conversions(const ExactFormat& from, const ExactFormat& to) {
  uint64_t wrong = 0;
  using Source = hg::precision::SmallFloat<From>;
  using Target = hg::precision::SmallFloat<To>;
  for (uint32_t a = 0; a < (1u << From.storage_bits()); ++a) {
    if (!is_finite(a, from)) continue;
    const ScaledInt x = exact_scaled(a, from);
    for (int mode = 0; mode < kModeCount; ++mode) {
      for (int flags = 0; flags < 4; ++flags) {
        const RoundingOptions o{
            .mode = kModes[mode], .saturate = (flags & 1) != 0, .flush_subnormals = (flags & 2) != 0};
        const uint32_t got = hg::convert<Target>(Source::from_bits(typename Source::storage_type(a)), o).bits();
        const uint32_t want = exact_round(negative_bit(a, from), u128(std::llabs(x.significand)), x.exponent, to,
                                          kExactModes[mode], o.saturate, o.flush_subnormals);
        if (got != want && wrong++ == 0) {
          INFO(hg::precision::format_name(From) << " " << hex16(a) << " to " << hg::precision::format_name(To) << " "
                                                << kModeNames[mode] << " flags " << flags);
          CHECK(hex16(got) == hex16(want));
        }
      }
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("conversions between any two formats: every finite value, every mode, saturate, flush",
          "[precision][arithmetic]") {
  using namespace hg::precision::oracle;
  CHECK(all_conversions<kBinary16, kBFloat16>(kExactF16, kExactBF16) == 0);
  CHECK(all_conversions<kBinary16, kE4M3>(kExactF16, kExactE4M3) == 0);
  CHECK(all_conversions<kBinary16, kE5M2>(kExactF16, kExactE5M2) == 0);
  CHECK(all_conversions<kBFloat16, kBinary16>(kExactBF16, kExactF16) == 0);
  CHECK(all_conversions<kBFloat16, kE4M3>(kExactBF16, kExactE4M3) == 0);
  CHECK(all_conversions<kBFloat16, kE5M2>(kExactBF16, kExactE5M2) == 0);
  CHECK(all_conversions<kE4M3, kBinary16>(kExactE4M3, kExactF16) == 0);
  CHECK(all_conversions<kE4M3, kE5M2>(kExactE4M3, kExactE5M2) == 0);
  CHECK(all_conversions<kE5M2, kE4M3>(kExactE5M2, kExactE4M3) == 0);
  CHECK(all_conversions<kE5M2, kBFloat16>(kExactE5M2, kExactBF16) == 0);
  // The constructor is the same conversion: bf16 from a half rounds once.
  CHECK(hex16(hg::bfloat16(half::from_bits(0x3C01), {.mode = Rounding::kUp}).bits()) == hex16(0x3F81));
  CHECK(hex16(hg::bfloat16(half::from_bits(0x3C01)).bits()) == hex16(0x3F80));
}

// Values by hand (f16: ulp 2^-10 in [1, 2), 2 in [2048, 4096); max 65504 = 0x7BFF, half an ulp
// there is 16).
TEST_CASE("issue 19 by hand: one rounding, ties, overflow per mode, flush and saturate", "[precision][arithmetic]") {
  const half one(1), tiny = half::from_bits(0x0001);  // 2^-24
  auto bits = [](half h) { return hex16(h.bits()); };
  // 1 + 2^-24 rounded up is 1 + 2^-10; rounding the float sum first (1 + 2^-24 is a float tie,
  // which goes to the even 1) and then up gives 1: the double rounding the exact path avoids.
  CHECK(bits(hg::add(one, tiny, {.mode = Rounding::kUp})) == hex16(0x3C01));
  CHECK(bits(half(one.to_float() + tiny.to_float(), {.mode = Rounding::kUp})) == hex16(0x3C00));
  CHECK(bits(hg::add(one, tiny, {.mode = Rounding::kDown})) == hex16(0x3C00));
  CHECK(bits(hg::sub(one, tiny, {.mode = Rounding::kDown})) == hex16(0x3BFF));  // below 1 the ulp is 2^-11
  CHECK(bits(hg::sub(one, tiny, {.mode = Rounding::kTowardZero})) == hex16(0x3BFF));
  CHECK(bits(hg::sub(one, tiny, {.mode = Rounding::kUp})) == hex16(0x3C00));
  CHECK(bits(hg::sub(-one, tiny, {.mode = Rounding::kDown})) == hex16(0xBC01));
  CHECK(bits(hg::mul(one, tiny, {.mode = Rounding::kUp})) == hex16(0x0001));  // exact
  // Ties: 2048 + 1 = 2049 lies between 2048 (0x6800, even) and 2050 (0x6801).
  const half k2048(2048);
  CHECK(bits(hg::add(k2048, one)) == hex16(0x6800));
  CHECK(bits(hg::add(k2048, one, {.mode = Rounding::kNearestAway})) == hex16(0x6801));
  CHECK(bits(hg::add(-k2048, -one, {.mode = Rounding::kNearestAway})) == hex16(0xE801));
  // 2048 + 3 = 2051 between 2050 (0x6801, odd) and 2052 (0x6802): both nearest modes go up.
  CHECK(bits(hg::add(k2048, half(3))) == hex16(0x6802));
  CHECK(bits(hg::add(k2048, half(3), {.mode = Rounding::kNearestAway})) == hex16(0x6802));
  // (1 + 3 * 2^-10) * 1.5 = 1.5 + 4.5 * 2^-10: between 0x3E04 (even) and 0x3E05.
  CHECK(bits(hg::mul(half::from_bits(0x3C03), half(1.5))) == hex16(0x3E04));
  CHECK(bits(hg::mul(half::from_bits(0x3C03), half(1.5), {.mode = Rounding::kNearestAway})) == hex16(0x3E05));
  // Overflow (IEEE 754 7.4): max * 2 = 131008.
  const half max(65504);
  CHECK(bits(hg::mul(max, half(2))) == hex16(0x7C00));
  CHECK(bits(hg::mul(max, half(2), {.mode = Rounding::kNearestAway})) == hex16(0x7C00));
  CHECK(bits(hg::mul(max, half(2), {.mode = Rounding::kUp})) == hex16(0x7C00));
  CHECK(bits(hg::mul(max, half(2), {.mode = Rounding::kDown})) == hex16(0x7BFF));
  CHECK(bits(hg::mul(max, half(2), {.mode = Rounding::kTowardZero})) == hex16(0x7BFF));
  CHECK(bits(hg::mul(max, half(-2), {.mode = Rounding::kUp})) == hex16(0xFBFF));
  CHECK(bits(hg::mul(max, half(-2), {.mode = Rounding::kDown})) == hex16(0xFC00));
  CHECK(bits(hg::mul(max, half(2), {.saturate = true})) == hex16(0x7BFF));
  CHECK(bits(hg::add(max, half(16))) == hex16(0x7C00));  // max + half an ulp: a tie, to inf
  CHECK(bits(hg::add(max, half(15))) == hex16(0x7BFF));
  CHECK(bits(hg::add(max, tiny, {.mode = Rounding::kUp})) == hex16(0x7C00));  // just above max
  // Flush: 2^-14 * 0.5 = 2^-15 is subnormal (0x0200); flushed to a zero of its sign. A sum that
  // rounds up to the smallest normal is kept (decided after rounding).
  const half min_normal = half::from_bits(0x0400);
  CHECK(bits(hg::mul(min_normal, half(0.5))) == hex16(0x0200));
  CHECK(bits(hg::mul(min_normal, half(0.5), {.flush_subnormals = true})) == hex16(0x0000));
  CHECK(bits(hg::mul(-min_normal, half(0.5), {.flush_subnormals = true})) == hex16(0x8000));
  CHECK(bits(hg::add(half::from_bits(0x03FF), tiny, {.flush_subnormals = true})) == hex16(0x0400));
  CHECK(bits(hg::mul(tiny, tiny, {.mode = Rounding::kUp})) == hex16(0x0001));
  CHECK(bits(hg::mul(tiny, tiny, {.mode = Rounding::kUp, .flush_subnormals = true})) == hex16(0x0000));
  // Saturate: e4m3 (no inf) 448 + 448 is NaN, or 448; e5m2 57344 + 57344 is inf, or 57344.
  using hg::float8_e4m3;
  using hg::float8_e5m2;
  CHECK(hex16(hg::add(float8_e4m3(448), float8_e4m3(448)).bits()) == hex16(0x7F));
  CHECK(hex16(hg::add(float8_e4m3(448), float8_e4m3(448), {.saturate = true}).bits()) == hex16(0x7E));
  CHECK(hex16(hg::add(float8_e5m2(57344), float8_e5m2(57344)).bits()) == hex16(0x7C));
  CHECK(hex16(hg::add(float8_e5m2(57344), float8_e5m2(57344), {.saturate = true}).bits()) == hex16(0x7B));
  // Signed zeros: x - x is +0, but -0 when rounding down (IEEE 754 6.3); -0 + -0 is -0.
  CHECK(bits(hg::sub(one, one)) == hex16(0x0000));
  CHECK(bits(hg::sub(one, one, {.mode = Rounding::kDown})) == hex16(0x8000));
  CHECK(bits(hg::add(half(0.0), half(-0.0), {.mode = Rounding::kDown})) == hex16(0x8000));
  CHECK(bits(hg::add(half(0.0), half(-0.0), {.mode = Rounding::kUp})) == hex16(0x0000));
  CHECK(bits(hg::add(half(-0.0), half(-0.0))) == hex16(0x8000));
  // Special operands: inf stays inf (exact) whatever the options; invalid gives NaN.
  const half inf = std::numeric_limits<half>::infinity();
  CHECK(bits(hg::add(inf, one, {.mode = Rounding::kDown, .saturate = true})) == hex16(0x7C00));
  CHECK(hg::div(half(0.0), half(0.0), {.mode = Rounding::kUp}).is_nan());
  CHECK(hg::fma(inf, half(0.0), one, {.mode = Rounding::kUp}).is_nan());
  CHECK(bits(hg::div(one, half(-0.0), {.mode = Rounding::kTowardZero})) == hex16(0xFC00));
}

namespace {

// The stochastic result for given random bits, from the exact value magnitude * 2^scale:
// truncate, and move one step away from zero iff frac32 + r >= 2^32, where frac32 is the top 32
// bits of the discarded fraction (rounding.h). Values of 2^(emax+1) or more are inf (e4m3: NaN).
uint32_t oracle_stochastic(bool negative, u128 magnitude, int scale, const ExactFormat& f, uint32_t r) {
  if (magnitude == 0) return exact_round(negative, 0, 0, f);
  const int top = hg::precision::oracle::bit_width128(magnitude) - 1;
  const int emax = f.max_field - f.bias;
  if (top + scale > emax) return exact_round(negative, 1, emax + 1, f, ExactMode::kNearestEven);
  const int shift = std::max(top + scale, 1 - f.bias) - (f.precision - 1) - scale;
  const uint64_t frac32 = shift <= 0    ? 0
                          : shift >= 32 ? uint64_t(magnitude >> (shift - 32)) & 0xFFFFFFFFu
                                        : uint64_t(magnitude << (32 - shift)) & 0xFFFFFFFFu;
  const bool away = frac32 + r >= (uint64_t{1} << 32);
  const ExactMode mode = !away ? ExactMode::kTowardZero : negative ? ExactMode::kDown : ExactMode::kUp;
  return exact_round(negative, magnitude, scale, f, mode);
}

}  // namespace

TEST_CASE("stochastic rounding: add mul div decide by frac32 + random bits as documented",
          "[precision][arithmetic][stochastic]") {
  using hg::precision::oracle::f16_units;
  using hg::precision::oracle::kExactF16;
  std::mt19937 rng(19);
  const uint32_t extremes[] = {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
  uint64_t wrong = 0;
  for (int k = 0; k < 200000; ++k) {
    uint16_t a, b;
    do a = uint16_t(rng()), b = uint16_t(k % 2 ? a + int(rng() % 65) - 32 : rng());
    while ((a & 0x7C00) == 0x7C00 || (b & 0x7C00) == 0x7C00 || (b & 0x7FFF) == 0);
    const uint32_t r = k % 10 == 0 ? extremes[k / 10 % 6] : uint32_t(rng());
    const RoundingOptions o{.mode = Rounding::kStochastic, .random_bits = r};
    const int64_t sum = f16_units(a) + f16_units(b);
    const __int128 product = __int128(f16_units(a)) * f16_units(b);  // |.| < 2^80
    const uint32_t want[3] = {
        sum == 0 ? uint32_t(a & b & 0x8000) : oracle_stochastic(sum < 0, u128(std::llabs(sum)), -24, kExactF16, r),
        oracle_stochastic((a ^ b) >> 15, u128(product < 0 ? -product : product), -48, kExactF16, r),
        f16_units(a) == 0
            ? uint32_t((a ^ b) & 0x8000)
            : oracle_stochastic((a ^ b) >> 15, sticky_quotient(f16_units(a), f16_units(b)), -64, kExactF16, r)};
    const uint32_t got[3] = {hg::precision::add_bits<kBinary16>(a, b, o), hg::precision::mul_bits<kBinary16>(a, b, o),
                             hg::precision::div_bits<kBinary16>(a, b, o)};
    for (int op = 0; op < 3; ++op) {
      if (got[op] != want[op] && wrong++ == 0) {
        INFO(hex16(a) << " "
                      << "+*/"[op] << " " << hex16(b) << " random bits " << r);
        CHECK(hex16(got[op]) == hex16(want[op]));
      }
    }
  }
  CHECK(wrong == 0);
}

// Over n draws the number of round-aways is Binomial(n, p), p = frac32 / 2^32, so the mean result
// differs from the exact value by ulp * (count/n - p) (plus < 2^-32 ulp from frac32's truncation),
// with standard error ulp * sqrt(p(1-p)/n); allowed: 5 standard errors (a miss has probability
// ~6e-7 for a good generator; the seed is fixed, so the test is deterministic).
TEST_CASE("stochastic rounding of add, div and sqrt is unbiased to 5 standard errors",
          "[precision][arithmetic][stochastic]") {
  struct Case {
    const char* what;
    double exact, lo, ulp;
    half (*op)(uint32_t random_bits);
  };
  // 1 + 0x0CCD: 0x0CCD is 1229 * 2^-22, so the sum is 1 + 0.300048828125 ulp (ulp 2^-10).
  // 1 / 3 and sqrt(2) from double, whose own errors (< 2^-53) are far below the bound.
  const Case cases[] = {
      {"1 + 1229 * 2^-22", 1 + 1229 * 0x1p-22, 1.0, 0x1p-10,
       [](uint32_t r) {
         return hg::add(half(1), half::from_bits(0x0CCD), {.mode = Rounding::kStochastic, .random_bits = r});
       }},
      {"-1 / 3", -1.0 / 3, -0x1.554p-2, -0x1p-12,
       [](uint32_t r) { return hg::div(half(-1), half(3), {.mode = Rounding::kStochastic, .random_bits = r}); }},
      {"sqrt(2)", std::sqrt(2.0), 0x1.6ap0, 0x1p-10,
       [](uint32_t r) { return hg::sqrt(half(2), {.mode = Rounding::kStochastic, .random_bits = r}); }},
  };
  constexpr int kDraws = 1000000;
  std::mt19937 rng(20261201);
  for (const Case& c : cases) {
    double sum = 0;  // multiples of 2^-24 of magnitude < 2^21: every partial sum is exact
    for (int i = 0; i < kDraws; ++i) sum += c.op(uint32_t(rng())).to_double();
    const double mean = sum / kDraws;
    const double p = (c.exact - c.lo) / c.ulp;
    const double std_error = std::fabs(c.ulp) * std::sqrt(p * (1 - p) / kDraws);
    INFO(c.what << ": p = " << p << ", mean - exact = " << (mean - c.exact) / std_error << " standard errors");
    REQUIRE(p > 0.05);
    REQUIRE(p < 0.95);
    CHECK(std::fabs(mean - c.exact) <= 5 * std_error + std::fabs(c.ulp) * 0x1p-32);
  }
}

namespace {

// f16 a op b in every deterministic mode from integer units of 2^-24 (|units| < 2^40): sums and
// products are exact in int64 / __int128 and rounded by exact_round.
uint32_t oracle_f16_units(int op, uint16_t a, uint16_t b, ExactMode mode) {
  using hg::precision::oracle::f16_units;
  using hg::precision::oracle::kExactF16;
  if (op == kAdd) {
    const int64_t s = f16_units(a) + f16_units(b);
    if (s == 0) {
      const bool both_zero = (a & 0x7FFF) == 0 && (b & 0x7FFF) == 0;
      const bool down = mode == ExactMode::kDown;
      return (both_zero ? (down ? (a | b) >> 15 : (a & b) >> 15) : down) ? 0x8000 : 0;
    }
    return exact_round(s < 0, u128(std::llabs(s)), -24, kExactF16, mode);
  }
  const __int128 p = __int128(f16_units(a)) * f16_units(b);
  return exact_round((a ^ b) >> 15, u128(p < 0 ? -p : p), -48, kExactF16, mode);
}

}  // namespace

// a in [1, 2) (1024 values) times every one of the 65536 patterns b, + and *, 5 modes:
// 671M results against the integer oracle; inf/NaN b only need the IEEE result class.
TEST_CASE("exhaustive: f16 + and * in 5 modes, a from 1 to 2, b every pattern", "[precision][arithmetic][exhaustive]") {
  uint64_t wrong = 0;
  uint32_t first_a = 0, first_b = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : wrong)
  for (int i = 0; i < 1024; ++i) {
    const uint16_t a = uint16_t(0x3C00 + i);
    for (uint32_t b = 0; b <= 0xFFFF; ++b) {
      const bool special = (b & 0x7C00) == 0x7C00;
      for (int mode = 0; mode < kModeCount; ++mode) {
        const RoundingOptions o{.mode = kModes[mode]};
        const uint32_t sum = hg::precision::add_bits<kBinary16>(a, b, o);
        const uint32_t product = hg::precision::mul_bits<kBinary16>(a, b, o);
        bool ok;
        if (special) {  // b is inf (a + inf = inf, a * inf = +-inf) or NaN
          ok = (b & 0x3FF) != 0 ? (sum & 0x7FFF) > 0x7C00 && (product & 0x7FFF) > 0x7C00 : sum == b && product == b;
        } else {
          ok = sum == oracle_f16_units(kAdd, a, uint16_t(b), kExactModes[mode]) &&
               product == oracle_f16_units(kMul, a, uint16_t(b), kExactModes[mode]);
        }
        if (!ok) {
          ++wrong;
#pragma omp critical(hg_arithmetic_first)
          if (first_a == 0) first_a = a, first_b = b;
        }
      }
    }
  }
  INFO("first mismatch: " << hex16(first_a) << ", " << hex16(first_b));
  CHECK(wrong == 0);
}
