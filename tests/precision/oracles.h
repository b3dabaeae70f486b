// Independent oracles for the precision tests: the CPU's own conversion instructions (F16C,
// AVX-512F, AVX512-BF16, each in a function compiled for its target and called only after a
// run-time CPU check), an exact rounding routine written from scratch (not from float_format.h),
// and a Hex wrapper so that failed bit comparisons print hex. Nothing here is used by the library.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace hg::precision::oracle {

// ---- printing -----------------------------------------------------------------------------

// A bit pattern that Catch2 prints in hex: CHECK(hex16(a) == hex16(b)) fails as "0x3c01 == 0x3c00".
struct Hex {
  uint64_t value;
  int digits;
  friend bool operator==(Hex a, Hex b) { return a.value == b.value; }
  friend std::ostream& operator<<(std::ostream& os, Hex h) {
    char buffer[24];
    std::snprintf(buffer, sizeof buffer, "0x%0*llx", h.digits, (unsigned long long)h.value);
    return os << buffer;
  }
};
inline Hex hex8(uint32_t v) { return {v, 2}; }
inline Hex hex16(uint32_t v) { return {v, 4}; }
inline Hex hex32(uint32_t v) { return {v, 8}; }

// "0x1.8p+0" (exact) for messages about a double input.
inline std::string hexfloat(double x) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%a", x);
  return buffer;
}

// ---- CPU conversion instructions ----------------------------------------------------------
// __m256 F16C needs AVX for the 256-bit forms; -mf16c implies it in GCC, but we check both.

inline bool cpu_has_f16c() { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx"); }
inline bool cpu_has_avx512f() { return __builtin_cpu_supports("avx512f"); }
inline bool cpu_has_avx512bf16() { return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f"); }

// VCVTPH2PS on one value.
__attribute__((target("f16c"))) inline float f16c_decode(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// out[i] = VCVTPS2PH(in[i]) with round-to-nearest-even from the immediate (MXCSR.RC ignored,
// exceptions suppressed); n a multiple of 8.
__attribute__((target("avx,f16c"))) inline void f16c_encode(const float* in, uint64_t n, uint16_t* out) {
  for (uint64_t i = 0; i < n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
}

// The AVX-512F form of the same instruction; n a multiple of 16. (maskz with an all-ones mask
// is the plain instruction; GCC 12's unmasked _mm512_cvtps_ph trips -Wuninitialized.)
__attribute__((target("avx512f"))) inline void avx512_encode_f16(const float* in, uint64_t n, uint16_t* out) {
  for (uint64_t i = 0; i < n; i += 16) {
    const __m256i h = _mm512_maskz_cvtps_ph(__mmask16(0xFFFF), _mm512_loadu_ps(in + i),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
}

// VCVTNEPS2BF16: round to nearest even, but subnormal inputs are treated as zero (DAZ) whatever
// MXCSR says; see test_bfloat16.cpp for the source. n a multiple of 16.
__attribute__((target("avx512bf16,avx512f"))) inline void avx512bf16_encode(const float* in, uint64_t n,
                                                                            uint16_t* out) {
  for (uint64_t i = 0; i < n; i += 16) {
    const __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)b);
  }
}

// The classic f32 -> bf16 round-to-nearest-even on the bit pattern (TensorFlow, PyTorch's
// c10::round_to_nearest_even): adding 0x7FFF plus the kept LSB carries into the kept half exactly
// when the discarded half exceeds a tie or is a tie with an odd kept half; a carry out of the
// mantissa bumps the exponent, which also turns values above bf16's max into inf. NaN: the top
// half with the quiet bit set (sign and top payload kept).
inline uint16_t bf16_reference(uint32_t bits) {
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x0040u);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// ---- exact rounding, written independently of float_format.h -------------------------------

using u128 = unsigned __int128;

// A binary format given by plain numbers typed in by the test.
struct ExactFormat {
  int precision;  // significand bits including the implicit one
  int exponent_bits;
  int bias;
  int max_field;              // largest exponent field holding finite values
  uint32_t max_top_mantissa;  // largest mantissa in that field
  bool has_inf;               // else overflow gives the NaN S.1..1 (e4m3)
};
inline constexpr ExactFormat kExactF16{11, 5, 15, 30, 0x3FF, true};
inline constexpr ExactFormat kExactBF16{8, 8, 127, 254, 0x7F, true};
inline constexpr ExactFormat kExactE4M3{4, 4, 7, 15, 6, false};
inline constexpr ExactFormat kExactE5M2{3, 5, 15, 30, 3, true};

enum class ExactMode { kNearestEven, kTowardZero, kUp, kDown, kNearestAway };

inline int bit_width128(u128 v) {
  const uint64_t high = uint64_t(v >> 64);
  return high != 0 ? 64 + std::bit_width(high) : std::bit_width(uint64_t(v));
}

// The bits of (negative ? -1 : 1) * magnitude * 2^scale rounded to `f` (magnitude < 2^126).
// IEEE 754 7.4 overflow: nearest goes to inf, a directed mode stops at max when it points
// toward zero; `saturate` always stops at max; `flush` turns subnormal results (decided after
// rounding) into zero. An exact zero is returned as a zero of the given sign.
inline uint32_t exact_round(bool negative, u128 magnitude, int scale, const ExactFormat& f,
                            ExactMode mode = ExactMode::kNearestEven, bool saturate = false, bool flush = false) {
  const int p = f.precision;
  const uint32_t sign = negative ? 1u << (f.exponent_bits + p - 1) : 0;
  const uint32_t max_bits = (uint32_t(f.max_field) << (p - 1)) | f.max_top_mantissa;
  auto overflow = [&]() -> uint32_t {
    bool to_inf = mode == ExactMode::kNearestEven || mode == ExactMode::kNearestAway ||
                  (mode == ExactMode::kUp && !negative) || (mode == ExactMode::kDown && negative);
    if (saturate || !to_inf) return sign | max_bits;
    const uint32_t all_ones_field = (1u << f.exponent_bits) - 1;
    return sign | (f.has_inf ? all_ones_field << (p - 1) : (all_ones_field << (p - 1)) | ((1u << (p - 1)) - 1));
  };
  if (magnitude == 0) return sign;

  const int top = bit_width128(magnitude) - 1;
  const int value_exponent = top + scale;  // 2^E <= value < 2^(E+1)
  const int min_normal_exponent = 1 - f.bias;
  if (value_exponent > f.max_field - f.bias + 1) return overflow();  // >= 2 * 2^emax > max
  const int quantum_exponent = std::max(value_exponent, min_normal_exponent) - (p - 1);
  const int shift = quantum_exponent - scale;

  u128 q = 0, rest = 0, half = 0;
  bool rest_above_half = false, rest_is_half = false, inexact = false;
  if (shift <= 0) {
    q = magnitude << -shift;
  } else if (shift >= 127) {  // magnitude < 2^126: the value is below half a quantum
    inexact = true;
  } else {
    q = magnitude >> shift;
    rest = magnitude - (q << shift);
    half = u128{1} << (shift - 1);
    rest_above_half = rest > half;
    rest_is_half = rest == half;
    inexact = rest != 0;
  }
  bool up = false;
  switch (mode) {
    case ExactMode::kNearestEven:
      up = rest_above_half || (rest_is_half && (q & 1) != 0);
      break;
    case ExactMode::kNearestAway:
      up = rest_above_half || rest_is_half;
      break;
    case ExactMode::kTowardZero:
      break;
    case ExactMode::kUp:
      up = inexact && !negative;
      break;
    case ExactMode::kDown:
      up = inexact && negative;
      break;
  }
  q += up ? 1 : 0;
  int e = quantum_exponent;
  if (q == (u128{1} << p)) {  // carried into the next binade
    q >>= 1;
    e += 1;
  }
  uint32_t field = 0, mantissa = 0;
  if (q >= (u128{1} << (p - 1))) {
    field = uint32_t(e + (p - 1) + f.bias);
    mantissa = uint32_t(q) - (1u << (p - 1));
  } else {
    mantissa = uint32_t(q);  // subnormal or zero: e is the subnormal quantum here
  }
  if (field > uint32_t(f.max_field) || (field == uint32_t(f.max_field) && mantissa > f.max_top_mantissa)) {
    return overflow();
  }
  if (flush && field == 0) return sign;
  return sign | (field << (p - 1)) | mantissa;
}

// A finite double as (negative, integer significand, scale) for exact_round; via frexp, not
// via the bit layout float_format.h uses.
struct ExactValue {
  bool negative;
  u128 magnitude;
  int scale;
};
inline ExactValue exact_of(double x) {
  int exponent = 0;
  const double fraction = std::frexp(std::fabs(x), &exponent);  // x = fraction * 2^exponent
  return {std::signbit(x), (u128)(uint64_t)std::ldexp(fraction, 53), exponent - 53};
}

// A finite f16 as a signed count of 2^-24 (every f16 is one): |units| <= 65504 * 2^24 < 2^40.
inline int64_t f16_units(uint16_t bits) {
  const int field = (bits >> 10) & 0x1F;
  const int64_t mantissa = bits & 0x3FF;
  const int64_t magnitude = field == 0 ? mantissa : (1024 + mantissa) << (field - 1);
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

// A signed integer significand times 2^exponent: how the oracles hold a finite value exactly.
struct ScaledInt {
  int64_t significand;
  int exponent;
};
inline ScaledInt f16_scaled(uint16_t bits) { return {f16_units(bits), -24}; }

// A finite bf16 as significand * 2^exponent (|significand| < 256).
inline ScaledInt bf16_scaled(uint16_t bits) {
  const int field = (bits >> 7) & 0xFF;
  const int64_t mantissa = bits & 0x7F;
  ScaledInt s = field == 0 ? ScaledInt{mantissa, -133} : ScaledInt{128 + mantissa, field - 134};
  if ((bits & 0x8000) != 0) s.significand = -s.significand;
  return s;
}

// a + b exactly rounded to nearest even in `f`, both given as significand * 2^exponent; an exact
// zero sum is -0 only when both operands are -0 (IEEE 754 6.3). When the exponents are more than
// 100 apart (only bf16 gets there) the smaller operand matters only as a sticky bit: it is
// replaced by one unit 2^-3 of the larger operand's unit 2^E. That is exact-equivalent when the
// result's quantum is at least 2^(E-1): then the true sum and the replacement lie strictly
// between the same two multiples of 2^(E-2), so between the same candidates and on the same side
// of their midpoint. The quantum condition holds when the larger-unit operand has a significand
// of at least 2^(p-1) (the sum stays >= 2^(E+p-2)) or a unit no larger than the subnormal
// quantum; for bf16 sums, and for a bf16 product (significand ka*kb) plus a bf16, one of the two
// always holds.
inline uint32_t exact_sum(ScaledInt a, ScaledInt b, const ExactFormat& f, bool both_negative_zero,
                          ExactMode mode = ExactMode::kNearestEven, bool saturate = false, bool flush = false) {
  if (a.significand == 0) a.exponent = b.exponent;  // a zero has no unit of its own
  if (b.significand == 0) b.exponent = a.exponent;
  if (a.exponent < b.exponent) std::swap(a, b);  // a has the larger unit
  const int distance = a.exponent - b.exponent;
  __int128 sum;
  int scale;
  if (distance <= 100) {
    sum = __int128(a.significand) * (__int128{1} << distance) + b.significand;
    scale = b.exponent;
  } else {
    sum = __int128(a.significand) * 8 + (b.significand > 0 ? 1 : b.significand < 0 ? -1 : 0);
    scale = a.exponent - 3;
  }
  if (sum == 0) return exact_round(both_negative_zero, 0, 0, f);
  return exact_round(sum < 0, (u128)(sum < 0 ? -sum : sum), scale, f, mode, saturate, flush);
}

// |n| / |d| * 2^64 as an integer with a sticky last bit (set iff the division is inexact): the
// true quotient and this one lie strictly between the same multiples of 2 units, so any
// rounding whose quantum is at least 4 units of the result sees the same value (|n|, |d| < 2^63).
inline u128 sticky_quotient(int64_t n, int64_t d) {
  const u128 numerator = (u128)(uint64_t)std::llabs(n) << 64;
  const u128 q = numerator / (uint64_t)std::llabs(d);
  return q | (q * (uint64_t)std::llabs(d) != numerator ? 1 : 0);
}

// A finite value of any ExactFormat from its bits, as significand * 2^exponent (signed).
inline ScaledInt exact_scaled(uint32_t bits, const ExactFormat& f) {
  const int m = f.precision - 1;
  const int field = int(bits >> m) & ((1 << f.exponent_bits) - 1);
  const int64_t mantissa = bits & ((1u << m) - 1);
  ScaledInt s =
      field == 0 ? ScaledInt{mantissa, 1 - f.bias - m} : ScaledInt{mantissa | (int64_t{1} << m), field - f.bias - m};
  if (((bits >> (m + f.exponent_bits)) & 1) != 0) s.significand = -s.significand;
  return s;
}

// ---- the 2^32 sweep -------------------------------------------------------------------------

struct SweepResult {
  uint64_t mismatches = 0;
  uint64_t first_bits = UINT64_MAX;  // the smallest mismatching f32 bit pattern
};

// Runs check(base, in, scratch, n, first_bad) over all 2^32 f32 bit patterns in blocks of
// n = 2^16 (in[i] has the bits base + i; scratch is n uint16_t for the instruction's output),
// on all OpenMP threads. check returns its block's mismatch count and sets first_bad to its
// first mismatching bits. Catch2 is not thread-safe, so assertions are left to the caller.
template <class Check>
SweepResult sweep_all_floats(Check&& check) {
  constexpr uint32_t kBlock = 1u << 16;
  uint64_t mismatches = 0;
  uint64_t first_bits = UINT64_MAX;
#pragma omp parallel
  {
    std::vector<float> in(kBlock);
    std::vector<uint16_t> scratch(kBlock);
#pragma omp for schedule(dynamic, 64) reduction(+ : mismatches)
    for (int64_t block = 0; block < (int64_t{1} << 32) / kBlock; ++block) {
      const uint32_t base = uint32_t(block) * kBlock;
      for (uint32_t i = 0; i < kBlock; ++i) in[i] = std::bit_cast<float>(base + i);
      uint64_t first_bad = UINT64_MAX;
      const uint64_t bad = check(base, in.data(), scratch.data(), kBlock, first_bad);
      if (bad != 0) {
        mismatches += bad;
#pragma omp critical(hg_sweep_first_mismatch)
        first_bits = std::min(first_bits, first_bad);
      }
    }
  }
  return {mismatches, first_bits};
}

// ---- rounding onto a value set, for any small format --------------------------------------
// A format given only by the list of its finite values (from the test's own reading of the
// fields): rounding picks between the two neighbours of the exact value by comparisons alone,
// with no field arithmetic, so it checks round_exact's shifts, subnormal and no-subnormal
// quanta, biases and overflow from the outside.

struct ValueSet {
  std::vector<double> values;   // the non-negative finite values, increasing, 0 first
  std::vector<uint32_t> codes;  // their encodings (positive sign)
  uint32_t sign_mask = 0;
  double min_normal = 0;  // smallest normal value: below it, flush applies
  // What lies beyond the largest value: "overflow" is a virtual next value one top ulp above max
  // (IEEE 754 7.4's unbounded-exponent rounding); it becomes inf or NaN (overflow_code), or max
  // with saturate or in a format without either (finite_only).
  bool finite_only = false;
  uint32_t overflow_code = 0;
};

// The bits of num / den (den > 0, the sign is num's; every product value * den and (lo + hi) / 2 * den exact in
// double, as for the small formats' values and their sums, products and quotients) rounded onto
// `set`. Ties: the neighbour whose encoding has an even last bit; if both do (0 and the smallest
// normal of a format without subnormals), the smaller magnitude.
inline uint32_t value_set_round(const ValueSet& set, double num, double den, ExactMode mode, bool saturate = false,
                                bool flush = false) {
  const bool negative = std::signbit(num);  // den > 0
  const uint32_t sign = negative ? set.sign_mask : 0;
  const double a = std::fabs(num), d = std::fabs(den);
  const size_t n = set.values.size();
  const double top_ulp = set.values[n - 1] - set.values[n - 2];
  // Index of the largest value <= a/d (n - 1 when above max), and whether it is exact.
  const auto above = std::partition_point(set.values.begin(), set.values.end(), [&](double v) { return v * d <= a; });
  const size_t lo = size_t(above - set.values.begin()) - 1;  // values[0] = 0 is always <= a
  if (set.values[lo] * d == a) {
    const uint32_t code = set.codes[lo];
    return (flush && lo > 0 && set.values[lo] < set.min_normal) ? sign : sign | code;
  }
  const double lo_value = set.values[lo];
  const bool hi_virtual = lo + 1 == n;  // above max: the next value is the overflow
  const double hi_value = hi_virtual ? lo_value + top_ulp : set.values[lo + 1];
  const uint32_t lo_code = set.codes[lo];
  const uint32_t hi_code = hi_virtual ? lo_code + 1 : set.codes[lo + 1];
  bool up = false;
  const double mid = (lo_value + hi_value) / 2 * d;
  switch (mode) {
    case ExactMode::kTowardZero:
      break;
    case ExactMode::kUp:
      up = !negative;
      break;
    case ExactMode::kDown:
      up = negative;
      break;
    case ExactMode::kNearestAway:
      up = a >= mid;
      break;
    case ExactMode::kNearestEven:
      up = a > mid || (a == mid && (lo_code & 1) != 0 && (hi_code & 1) == 0);
      break;
  }
  if (!up) return (flush && lo > 0 && lo_value < set.min_normal) ? sign : sign | lo_code;
  if (hi_virtual) return sign | (saturate || set.finite_only ? lo_code : set.overflow_code);
  return (flush && hi_value < set.min_normal) ? sign : sign | hi_code;
}

}  // namespace hg::precision::oracle
