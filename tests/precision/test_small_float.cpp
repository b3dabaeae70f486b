// SmallFloat (halfgrad/precision/small_float.h): arithmetic of half and bfloat16 bit for bit against GCC's
// _Float16 and against exact integer oracles (random pairs every run; whole exponent windows in
// `[exhaustive]`), sqrt and fma against exact checks, IEEE inf/NaN/signed-zero rules,
// comparisons, numeric_limits, finfo, describe and bit_fields. Conversions are tested in
// test_float_format.cpp and the per-format files.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/finfo.h"
#include "halfgrad/precision/float8.h"
#include "halfgrad/precision/half.h"
#include "tests/precision/oracles.h"
#include "tests/precision/sweep_modes.h"
#include "tests/sweep_stride.h"

namespace {

using hg::bfloat16;
using hg::float8_e4m3;
using hg::float8_e5m2;
using hg::half;
using hg::precision::oracle::bf16_scaled;
using hg::precision::oracle::exact_round;
using hg::precision::oracle::exact_sum;
using hg::precision::oracle::f16_scaled;
using hg::precision::oracle::f16_units;
using hg::precision::oracle::hex16;
using hg::precision::oracle::hex8;
using hg::precision::oracle::kExactBF16;
using hg::precision::oracle::kExactF16;
using hg::precision::oracle::ScaledInt;
using hg::precision::oracle::sticky_quotient;

using hg::testing::kAdd;
using hg::testing::kDiv;
using hg::testing::kMul;
using hg::testing::kOpCount;
using hg::testing::kOpNames;
using hg::testing::kSub;
constexpr unsigned kAllOps = 0xF;

bool f16_nan(uint16_t b) { return (b & 0x7C00) == 0x7C00 && (b & 0x03FF) != 0; }
bool f16_finite(uint16_t b) { return (b & 0x7C00) != 0x7C00; }
bool bf16_nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0; }
bool bf16_finite(uint16_t b) { return (b & 0x7F80) != 0x7F80; }

template <class T>
T apply(int op, T a, T b) {
  switch (op) {
    case kAdd:
      return a + b;
    case kSub:
      return a - b;
    case kMul:
      return a * b;
    default:
      return a / b;
  }
}

// The correctly rounded (nearest even) result of a op b for two finite values given as
// significand * 2^exponent, in format f; for / the divisor is nonzero. Zero results: the IEEE
// 754 6.3 signs (x + -x = +0; -0 + -0 = -0; products and quotients: xor of signs).
uint32_t exact_op(int op, ScaledInt a, ScaledInt b, bool a_negative, bool b_negative,
                  const hg::precision::oracle::ExactFormat& f) {
  switch (op) {
    case kAdd:
      return exact_sum(a, b, f, a_negative && b_negative);
    case kSub:
      return exact_sum(a, {-b.significand, b.exponent}, f, a_negative && !b_negative);
    case kMul: {
      const __int128 p = __int128(a.significand) * b.significand;
      return exact_round(a_negative != b_negative, (hg::precision::oracle::u128)(p < 0 ? -p : p),
                         a.exponent + b.exponent, f);
    }
    default:
      if (a.significand == 0) return exact_round(a_negative != b_negative, 0, 0, f);
      return exact_round(a_negative != b_negative, sticky_quotient(a.significand, b.significand),
                         a.exponent - b.exponent - 64, f);
  }
}

// The first failure of a sweep, kept per thread and merged; `i`, `j` index the operands.
struct Failure {
  uint64_t count = 0;
  int64_t i = -1, j = -1;
  uint16_t a = 0, b = 0, ours = 0, expected = 0;
  int op = 0;
  const char* against = "";

  void record(int64_t i_, int64_t j_, uint16_t a_, uint16_t b_, int op_, uint16_t ours_, uint16_t expected_,
              const char* against_) {
    if (count++ == 0 || i_ < i || (i_ == i && j_ < j)) {
      i = i_, j = j_, a = a_, b = b_, op = op_, ours = ours_, expected = expected_;
      against = against_;
    }
  }
  void merge(const Failure& other) {
    if (other.count == 0) return;
    const uint64_t total = count + other.count;
    if (count == 0 || other.i < i || (other.i == i && other.j < j)) *this = other;
    count = total;
  }
};

std::ostream& operator<<(std::ostream& os, const Failure& f) {
  if (f.count == 0) return os << "no failures";
  return os << f.count << " failures; first: " << hex16(f.a) << " " << kOpNames[f.op] << " " << hex16(f.b) << " gave "
            << hex16(f.ours) << ", " << f.against << " says " << hex16(f.expected);
}

// Runs check(i, j, failure) over [0, na) x [0, nb) on all OpenMP threads.
template <class Check>
Failure sweep_pairs(int64_t na, int64_t nb, Check&& check) {
  Failure total;
#pragma omp parallel
  {
    Failure local;
#pragma omp for schedule(dynamic, 8)
    for (int64_t i = 0; i < na; ++i) {
      for (int64_t j = 0; j < nb; ++j) check(i, j, local);
    }
#pragma omp critical(hg_small_float_merge)
    total.merge(local);
  }
  return total;
}

// half a op b against the exact oracle and (if the compiler has it) GCC's _Float16; a NaN
// expected result only requires a NaN (IEEE 754 does not fix a NaN result's payload). GCC 12 on
// x86-64 without AVX512-FP16 compiles a _Float16 a + b as __extendhfsf2 on both operands, addss,
// __truncsfhf2: widen, compute in float, round (correct by Figueroa's double-rounding theorem,
// f32's 24 bits >= 2 * 11 + 2), independent of ours (exact integers, halfgrad/precision/arithmetic.h);
// the exact oracle checks both.
void check_f16(int64_t i, int64_t j, uint16_t a, uint16_t b, unsigned ops, Failure& failure) {
  for (int op = 0; op < kOpCount; ++op) {
    if ((ops & (1u << op)) == 0) continue;
    const uint16_t ours = apply(op, half::from_bits(a), half::from_bits(b)).bits();
#if defined(__FLT16_MANT_DIG__)
    const _Float16 reference = apply(op, std::bit_cast<_Float16>(a), std::bit_cast<_Float16>(b));
    const uint16_t gcc = std::bit_cast<uint16_t>(reference);
    if (f16_nan(gcc) ? !f16_nan(ours) : ours != gcc) failure.record(i, j, a, b, op, ours, gcc, "_Float16");
#endif
    if (f16_finite(a) && f16_finite(b) && !(op == kDiv && (b & 0x7FFF) == 0)) {
      const uint16_t exact = uint16_t(exact_op(op, f16_scaled(a), f16_scaled(b), a >> 15, b >> 15, kExactF16));
      if (ours != exact) failure.record(i, j, a, b, op, ours, exact, "the exact oracle");
#if defined(__FLT16_MANT_DIG__)
      // And the reference itself: GCC computes in float and rounds, which must be exact too.
      if (gcc != exact) failure.record(i, j, a, b, op, gcc, exact, "exact (for _Float16's result)");
#endif
    }
  }
}

#if defined(__FLT16_MANT_DIG__)
static_assert(__FLT16_MANT_DIG__ == 11 && __FLT16_MAX_EXP__ == 16 && sizeof(_Float16) == 2,
              "_Float16 must be IEEE binary16");
#endif

std::vector<uint16_t> f16_window(uint32_t first_field, uint32_t last_field) {
  std::vector<uint16_t> values;
  for (uint32_t sign : {0u, 0x8000u}) {
    for (uint32_t field = first_field; field <= last_field; ++field) {
      for (uint32_t m = 0; m < 1024; ++m) values.push_back(uint16_t(sign | field << 10 | m));
    }
  }
  return values;
}

}  // namespace

TEST_CASE("half + - * / equal _Float16 and the exact oracle on 1e6 random pairs", "[precision][small_float]") {
#if !defined(__FLT16_MANT_DIG__)
  WARN("this compiler has no _Float16: only the exact oracle judges the arithmetic");
#endif
  // Half the pairs are uniform bit patterns (all exponents, inf, NaN); half are close pairs
  // (b within +-64 patterns of +-a), where sums cancel and quotients land near 1.
  std::mt19937 rng(1);
  // (a sample of them in the sanitized tree: tests/sweep_stride.h)
  std::vector<std::pair<uint16_t, uint16_t>> pairs(1000000 / hg::testing::kSweepStride);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const uint32_t r = rng();
    const uint16_t a = uint16_t(r);
    uint16_t b = uint16_t(r >> 16);
    if (k % 2 == 1) b = uint16_t((a + int(rng() % 129) - 64) ^ (rng() & 0x8000));
    pairs[k] = {a, b};
  }
  const Failure failure = sweep_pairs(int64_t(pairs.size()), 1, [&](int64_t i, int64_t, Failure& f) {
    check_f16(i, 0, pairs[i].first, pairs[i].second, kAllOps, f);
  });
  INFO(failure);
  CHECK(failure.count == 0);
}

// Every pair of the 6144 values with exponent field 14..16 ([0.5, 4), both signs): 37.7M pairs
// x 4 ops. Measured here: about 9 s of CPU, 5-11 s wall on 2 threads.
TEST_CASE("half + - * / exhaustive over the exponent window from 0.5 to 4", "[precision][small_float][exhaustive]") {
  const std::vector<uint16_t> w = f16_window(14, 16);
  const Failure failure = sweep_pairs(int64_t(w.size()), int64_t(w.size()), [&](int64_t i, int64_t j, Failure& f) {
    check_f16(i, j, w[i], w[j], kAllOps, f);
  });
  INFO(failure);
  CHECK(failure.count == 0);
}

// Subnormals: + and - over every pair with exponent field 0..1 (all subnormals and the smallest
// normal binade, both signs); * and / of those by every value in [0.5, 4), which puts the
// results in the subnormal range where the rounding position is fixed at 2^-24. 16.8M + 25.2M
// pairs x 2 ops; measured here: about 13 s of CPU, 7-18 s wall on 2 threads.
TEST_CASE("half arithmetic exhaustive over the subnormal window", "[precision][small_float][exhaustive]") {
  const std::vector<uint16_t> s = f16_window(0, 1);
  const std::vector<uint16_t> w = f16_window(14, 16);
  const Failure add = sweep_pairs(int64_t(s.size()), int64_t(s.size()), [&](int64_t i, int64_t j, Failure& f) {
    check_f16(i, j, s[i], s[j], 1u << kAdd | 1u << kSub, f);
  });
  INFO(add);
  CHECK(add.count == 0);
  const Failure mul = sweep_pairs(int64_t(s.size()), int64_t(w.size()), [&](int64_t i, int64_t j, Failure& f) {
    check_f16(i, j, s[i], w[j], 1u << kMul | 1u << kDiv, f);
  });
  INFO(mul);
  CHECK(mul.count == 0);
}

// The oracle is only as good as its hand checks: a few products and sums worked out on paper.
TEST_CASE("the exact arithmetic oracle on hand-computed cases", "[precision][small_float]") {
  // (1 + 2^-10) * 1.5 = 1.5 + 3 * 2^-11: in [1,2) (ulp 2^-10) a tie between 1.5 + 2^-10
  // (0x3E01, odd) and 1.5 + 2^-9 (0x3E02, even).
  CHECK(hex16(exact_op(kMul, f16_scaled(0x3C01), f16_scaled(0x3E00), false, false, kExactF16)) == hex16(0x3E02));
  // 1 + 2^-11 (not a half) cannot be a sum; 1 + 2^-24 = 1 (0x3C00) + 2^-24 (0x0001): far below
  // half an ulp.
  CHECK(hex16(exact_op(kAdd, f16_scaled(0x3C00), f16_scaled(0x0001), false, false, kExactF16)) == hex16(0x3C00));
  // 2048 + 1 = 2049: spacing 2 in [2048, 4096): tie between 2048 (even) and 2050.
  CHECK(hex16(exact_op(kAdd, f16_scaled(0x6800), f16_scaled(0x3C00), false, false, kExactF16)) == hex16(0x6800));
  // 2048 + 3 = 2051: tie between 2050 (0x6801, odd) and 2052 (0x6802).
  CHECK(hex16(exact_op(kAdd, f16_scaled(0x6800), f16_scaled(0x4200), false, false, kExactF16)) == hex16(0x6802));
  // 1 / 3 = 0x1.555...p-2 -> 0x1.554p-2 (0x3555), the remainder below half.
  CHECK(hex16(exact_op(kDiv, f16_scaled(0x3C00), f16_scaled(0x4200), false, false, kExactF16)) == hex16(0x3555));
}

TEST_CASE("half: IEEE rules for inf and NaN and signed zeros", "[precision][small_float]") {
  const half inf = std::numeric_limits<half>::infinity();
  const half zero(0.0f), neg_zero(-0.0f), one(1.0f), max(65504.0f);
  auto bits = [](half h) { return hex16(h.bits()); };
  CHECK((inf - inf).is_nan());
  CHECK((inf + -inf).is_nan());
  CHECK(bits(inf + inf) == hex16(0x7C00));
  CHECK((zero * inf).is_nan());
  CHECK((neg_zero * -inf).is_nan());
  CHECK((zero / zero).is_nan());
  CHECK((inf / inf).is_nan());
  CHECK(bits(one / zero) == hex16(0x7C00));
  CHECK(bits(one / neg_zero) == hex16(0xFC00));
  CHECK(bits(-one / zero) == hex16(0xFC00));
  CHECK(bits(-one / neg_zero) == hex16(0x7C00));
  CHECK(bits(one / inf) == hex16(0x0000));
  CHECK(bits(-one / inf) == hex16(0x8000));
  CHECK(bits(inf * -one) == hex16(0xFC00));
  // Signed zeros (IEEE 754 6.3): an exact zero sum is +0 in round-to-nearest unless both
  // operands are -0.
  CHECK(bits(neg_zero + neg_zero) == hex16(0x8000));
  CHECK(bits(neg_zero + zero) == hex16(0x0000));
  CHECK(bits(zero + neg_zero) == hex16(0x0000));
  CHECK(bits(neg_zero - zero) == hex16(0x8000));
  CHECK(bits(neg_zero - neg_zero) == hex16(0x0000));
  CHECK(bits(zero - zero) == hex16(0x0000));
  for (uint16_t x : {0x3C00, 0xBC00, 0x0001, 0x8001, 0x7BFF, 0xFBFF, 0x3555}) {
    INFO("x = " << hex16(x));
    CHECK(bits(half::from_bits(x) - half::from_bits(x)) == hex16(0x0000));
    CHECK(bits(-half::from_bits(x) + half::from_bits(x)) == hex16(0x0000));
  }
  CHECK(bits(neg_zero * half(5.0f)) == hex16(0x8000));
  CHECK(bits(neg_zero * half(-5.0f)) == hex16(0x0000));
  CHECK(bits(half::from_bits(0x8001) * half(0.25f)) == hex16(0x8000));  // underflow keeps the sign
  CHECK(bits(half::from_bits(0x0001) * half(0.5f)) == hex16(0x0000));   // 2^-25: tie to even 0
  CHECK(bits(half::from_bits(0x0003) * half(0.5f)) == hex16(0x0002));   // 1.5 units: tie to 2
  // Overflow: max + half ulp (16) is a tie that goes to inf; a little less stays at max.
  CHECK(bits(max + half(16.0f)) == hex16(0x7C00));
  CHECK(bits(max + half(15.0f)) == hex16(0x7BFF));
  CHECK(bits(max * half(2.0f)) == hex16(0x7C00));
  CHECK(bits(-max - max) == hex16(0xFC00));
  // NaN in, NaN out; negation flips the sign bit of anything.
  const half nan = std::numeric_limits<half>::quiet_NaN();
  CHECK((nan + one).is_nan());
  CHECK((nan * zero).is_nan());
  CHECK((one / nan).is_nan());
  CHECK(bits(-nan) == hex16(0xFE00));
  CHECK(bits(-zero) == hex16(0x8000));
  half acc(1.0f);
  acc += half(0.5f);
  acc *= half(4.0f);
  acc -= half(1.0f);
  acc /= half(2.0f);
  CHECK(bits(acc) == hex16(0x4100));  // ((1 + 0.5) * 4 - 1) / 2 = 2.5 = 1.25 * 2^1
}

// sqrt of every non-negative finite half. r is correctly rounded iff the true root lies between
// the midpoints to r's neighbours: with everything in units of 2^-25 (midpoints are odd multiples
// of it) and x in units of 2^-50, lo^2 < x * 2^26 < hi^2, exactly in __int128. A root is never
// exactly a midpoint (an odd 12-bit square is not an 11-bit number), so there are no ties and
// the inequalities are strict.
TEST_CASE("half sqrt is correctly rounded for all 31744 positive finite values", "[precision][small_float]") {
  int wrong = 0;
  for (uint32_t bits = 1; bits < 0x7C00; ++bits) {
    const half x = half::from_bits(uint16_t(bits));
    const uint16_t r = sqrt(x).bits();
    const uint16_t via_double = half(std::sqrt(double(x.to_float()))).bits();
    const __int128 root = f16_units(r), below = f16_units(uint16_t(r - 1)), above = f16_units(uint16_t(r + 1));
    const __int128 lo = root + below, hi = root + above;  // units of 2^-25
    const __int128 scaled_x = __int128(f16_units(uint16_t(bits))) << 26;
    const bool ok = r == via_double && r > 0 && r < 0x7C00 && lo * lo < scaled_x && scaled_x < hi * hi;
    if (!ok && wrong++ == 0) {
      INFO("sqrt(" << hex16(bits) << ") = " << hex16(r) << ", double sqrt rounded: " << hex16(via_double));
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);
  CHECK(hex16(sqrt(half(0.0f)).bits()) == hex16(0x0000));
  CHECK(hex16(sqrt(half(-0.0f)).bits()) == hex16(0x8000));  // IEEE: sqrt(-0) = -0
  CHECK(hex16(sqrt(half(4.0f)).bits()) == hex16(0x4000));
  CHECK(hex16(sqrt(std::numeric_limits<half>::infinity()).bits()) == hex16(0x7C00));
  CHECK(sqrt(half(-1.0f)).is_nan());
  CHECK(sqrt(half::from_bits(0x8001)).is_nan());
  CHECK(sqrt(-std::numeric_limits<half>::infinity()).is_nan());
  CHECK(sqrt(std::numeric_limits<half>::quiet_NaN()).is_nan());
}

namespace {

// a * b + c exactly: every half is k * 2^-24, so the sum is an integer times 2^-48 (|.| < 2^81).
// An exact zero is -0 only if a*b and c are both zeros of negative sign.
uint16_t exact_fma_f16(uint16_t a, uint16_t b, uint16_t c) {
  const __int128 product = __int128(f16_units(a)) * f16_units(b);
  const __int128 sum = product + (__int128(f16_units(c)) << 24);
  if (sum == 0) {
    const bool product_negative = ((a ^ b) & 0x8000) != 0;
    return uint16_t(
        exact_round(product == 0 && f16_units(c) == 0 && product_negative && (c & 0x8000), 0, 0, kExactF16));
  }
  return uint16_t(exact_round(sum < 0, (hg::precision::oracle::u128)(sum < 0 ? -sum : sum), -48, kExactF16));
}

// What fma would be with the product and sum in float and one final rounding: wrong when the
// float sum lands on a half tie that the exact value was not on. Used to show that the hard
// cases are hard. (A double intermediate without round-to-odd would pass every f16 case, so
// this test cannot see that step: all terms are multiples of 2^-48, so a double sum is inexact
// only if |a*b + c| >= 2^5; landing within a double rounding error (< 2^(e-52)) of an f16
// midpoint without being on it would then need a*b to have significant bits both at or above
// the grid of c and the midpoints (>= 2^-24) and below 2^(e-52) (<= 2^-47): 24 bits or more,
// and a*b has 22. Round-to-odd matters for bf16, whose exponent range lets c sit 2^-130 below
// a*b: the bf16 fma test checks it.)
uint16_t naive_fma_f16(uint16_t a, uint16_t b, uint16_t c) {
  const float sum = half::from_bits(a).to_float() * half::from_bits(b).to_float() + half::from_bits(c).to_float();
  return half(sum).bits();
}

uint16_t random_finite_f16(std::mt19937& rng) {
  uint16_t b;
  do b = uint16_t(rng());
  while (!f16_finite(b));
  return b;
}

}  // namespace

TEST_CASE("half fma is correctly rounded: random triples and hard cases", "[precision][small_float]") {
  std::mt19937 rng(3);
  std::vector<std::array<uint16_t, 3>> triples;
  // Uniform random finite triples.
  for (int k = 0; k < 400000; ++k)
    triples.push_back({random_finite_f16(rng), random_finite_f16(rng), random_finite_f16(rng)});
  // c tiny beside a*b: b has a short significand (1.5, 1.25, 1.75, 1.125, 1.375 times a power
  // of two), so a*b often is, or is near, a tie of the f16 grid; |c| <= 2^-11 |a*b| only
  // decides the direction.
  const uint16_t short_significands[] = {0x3E00, 0x3D00, 0x3F00, 0x3C80, 0x3D80};
  for (int k = 0; k < 300000; ++k) {
    const uint16_t a = uint16_t(0x2000 + rng() % 0x3800) ^ uint16_t(rng() & 0x8000);  // [2^-7, 2^7)
    const uint16_t b = uint16_t(short_significands[rng() % 5] + (int(rng() % 9) - 4) * 0x400);
    const int product_field =
        int(half(half::from_bits(a).to_float() * half::from_bits(b).to_float()).bits() >> 10 & 0x1F);
    const int c_field = product_field > 11 ? int(rng() % uint32_t(product_field - 11)) : 0;
    const uint16_t c = uint16_t(c_field << 10 | (rng() & 0x3FF) | (rng() & 0x8000));
    triples.push_back({a, b, c});
  }
  // Cancellation: c is minus the rounded product, give or take 3 ulps; the result is the
  // product's rounding error (plus those ulps), exact or nearly so.
  for (int k = 0; k < 300000; ++k) {
    const uint16_t a = random_finite_f16(rng), b = random_finite_f16(rng);
    const uint16_t rounded = half(half::from_bits(a).to_float() * half::from_bits(b).to_float()).bits();
    if (!f16_finite(rounded)) continue;
    const uint16_t c = uint16_t((rounded + int(rng() % 7) - 3) ^ 0x8000);
    if (f16_finite(c)) triples.push_back({a, b, c});
  }
  // By hand: (1 + 2^-10) * 1.5 = 1.5 + 3*2^-11, a tie between 0x3E01 and 0x3E02. Minus 2^-24
  // puts it just below: 0x3E01 (float would round 1.5 + 3*2^-11 - 2^-24 back onto the tie,
  // since float's ulp at 1.5 is 2^-23, and then go to even 0x3E02). Plus 2^-24: 0x3E02.
  CHECK(hex16(fma(half::from_bits(0x3C01), half::from_bits(0x3E00), half::from_bits(0x8001)).bits()) == hex16(0x3E01));
  CHECK(hex16(naive_fma_f16(0x3C01, 0x3E00, 0x8001)) == hex16(0x3E02));
  CHECK(hex16(fma(half::from_bits(0x3C01), half::from_bits(0x3E00), half::from_bits(0x0001)).bits()) == hex16(0x3E02));
  // 65504 * 2 overflows f16 but not the fused operation: 131008 - 65504 = 65504.
  CHECK(hex16(fma(half(65504.0f), half(2.0f), half(-65504.0f)).bits()) == hex16(0x7BFF));
  // Zeros: 1*1 - 1 = +0; (-0)*1 + (-0) = -0; 1*(-0) + 0 = +0.
  CHECK(hex16(fma(half(1.0f), half(1.0f), half(-1.0f)).bits()) == hex16(0x0000));
  CHECK(hex16(fma(half(-0.0f), half(1.0f), half(-0.0f)).bits()) == hex16(0x8000));
  CHECK(hex16(fma(half(1.0f), half(-0.0f), half(0.0f)).bits()) == hex16(0x0000));
  // inf * 0 is invalid even when c is a number; inf - inf too.
  const half inf = std::numeric_limits<half>::infinity();
  CHECK(fma(inf, half(0.0f), half(1.0f)).is_nan());
  CHECK(fma(inf, half(1.0f), -inf).is_nan());
  CHECK(hex16(fma(half(2.0f), half(3.0f), inf).bits()) == hex16(0x7C00));
  CHECK(fma(half(1.0f), half(1.0f), std::numeric_limits<half>::quiet_NaN()).is_nan());

  int wrong = 0, naive_wrong = 0;
  for (const auto& [a, b, c] : triples) {
    const uint16_t ours = fma(half::from_bits(a), half::from_bits(b), half::from_bits(c)).bits();
    const uint16_t expected = exact_fma_f16(a, b, c);
    naive_wrong += naive_fma_f16(a, b, c) != expected;
    if (ours != expected && wrong++ == 0) {
      INFO("fma(" << hex16(a) << ", " << hex16(b) << ", " << hex16(c) << ")");
      CHECK(hex16(ours) == hex16(expected));
    }
  }
  CHECK(wrong == 0);
  INFO(naive_wrong << " of " << triples.size() << " triples defeat a float-intermediate fma");
  CHECK(naive_wrong > 100);  // the hard cases are hard
}

namespace {

// a * b + c exactly for bf16: the product ka*kb * 2^(ea+eb) is exact in int64; the sum is
// rounded by exact_sum (an exact zero is -0 only for two negative zeros).
uint16_t exact_fma_bf16(uint16_t a, uint16_t b, uint16_t c) {
  const ScaledInt x = bf16_scaled(a), y = bf16_scaled(b), z = bf16_scaled(c);
  const ScaledInt product{x.significand * y.significand, x.exponent + y.exponent};
  return uint16_t(exact_sum(product, z, kExactBF16, ((a ^ b) & 0x8000) != 0 && (c & 0x8000) != 0));
}

// fma with the sum in double and no round-to-odd: wrong when a*b is a bf16 tie and c, more than
// 53 bits below it, is lost to the double rounding.
uint16_t naive_fma_bf16(uint16_t a, uint16_t b, uint16_t c) {
  const double sum =
      bfloat16::from_bits(a).to_double() * bfloat16::from_bits(b).to_double() + bfloat16::from_bits(c).to_double();
  return bfloat16(sum).bits();
}

uint16_t random_finite_bf16(std::mt19937& rng) {
  uint16_t b;
  do b = uint16_t(rng());
  while (!bf16_finite(b));
  return b;
}

}  // namespace

TEST_CASE("bfloat16 fma is correctly rounded: random triples and hard cases", "[precision][small_float]") {
  std::mt19937 rng(4);
  std::vector<std::array<uint16_t, 3>> triples;
  for (int k = 0; k < 300000; ++k) {
    triples.push_back({random_finite_bf16(rng), random_finite_bf16(rng), random_finite_bf16(rng)});
  }
  // c far below a*b (anywhere from 9 to ~250 binades down, subnormals included), with b of a
  // short significand so that a*b is often a tie of the bf16 grid.
  const uint16_t short_significands[] = {0x3FC0, 0x3FA0, 0x3FE0, 0x3F90, 0x3FB0};
  for (int k = 0; k < 300000; ++k) {
    const uint16_t a = uint16_t((100 + rng() % 55) << 7 | (rng() & 0x7F) | (rng() & 0x8000));
    const uint16_t b = uint16_t(short_significands[rng() % 5] + (int(rng() % 9) - 4) * 0x80);
    const int product_field = (a >> 7 & 0xFF) + (b >> 7 & 0xFF) - 127;
    const int c_field = product_field > 9 ? int(rng() % uint32_t(product_field - 9)) : 0;
    triples.push_back({a, b, uint16_t(c_field << 7 | (rng() & 0x7F) | (rng() & 0x8000))});
  }
  // Cancellation: c is minus the rounded product, give or take 3 ulps.
  for (int k = 0; k < 300000; ++k) {
    const uint16_t a = random_finite_bf16(rng), b = random_finite_bf16(rng);
    const uint16_t rounded = (bfloat16::from_bits(a) * bfloat16::from_bits(b)).bits();
    const uint16_t c = uint16_t((rounded + int(rng() % 7) - 3) ^ 0x8000);
    if (bf16_finite(rounded) && bf16_finite(c)) triples.push_back({a, b, c});
  }
  int wrong = 0, naive_wrong = 0;
  for (const auto& [a, b, c] : triples) {
    const uint16_t ours = fma(bfloat16::from_bits(a), bfloat16::from_bits(b), bfloat16::from_bits(c)).bits();
    const uint16_t expected = exact_fma_bf16(a, b, c);
    naive_wrong += naive_fma_bf16(a, b, c) != expected;
    if (ours != expected && wrong++ == 0) {
      INFO("fma(" << hex16(a) << ", " << hex16(b) << ", " << hex16(c) << ")");
      CHECK(hex16(ours) == hex16(expected));
    }
  }
  CHECK(wrong == 0);
  INFO(naive_wrong << " of " << triples.size() << " triples defeat a double fma without round-to-odd");
  CHECK(naive_wrong > 100);  // the hard cases are hard
}

TEST_CASE("bfloat16 + - * / equal float-then-round and the exact oracle on 1e6 random pairs",
          "[precision][small_float]") {
  // Half uniform bit patterns, half close pairs (exponent fields within 3, random mantissas),
  // where the operands interact.
  std::mt19937 rng(2);
  // (a sample of them in the sanitized tree: tests/sweep_stride.h)
  std::vector<std::pair<uint16_t, uint16_t>> pairs(1000000 / hg::testing::kSweepStride);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const uint32_t r = rng();
    const uint16_t a = uint16_t(r);
    uint16_t b = uint16_t(r >> 16);
    if (k % 2 == 1) {
      const int field = std::clamp(int(a >> 7 & 0xFF) + int(rng() % 7) - 3, 0, 254);
      b = uint16_t((rng() & 0x8000) | field << 7 | (rng() & 0x7F));
    }
    pairs[k] = {a, b};
  }
  const Failure failure = sweep_pairs(int64_t(pairs.size()), 1, [&](int64_t i, int64_t, Failure& f) {
    const auto [a, b] = pairs[i];
    for (int op = 0; op < kOpCount; ++op) {
      const uint16_t ours = apply(op, bfloat16::from_bits(a), bfloat16::from_bits(b)).bits();
      const float wide = apply(op, bfloat16::from_bits(a).to_float(), bfloat16::from_bits(b).to_float());
      const uint16_t formula = hg::precision::oracle::bf16_reference(std::bit_cast<uint32_t>(wide));
      if (bf16_nan(formula) ? !bf16_nan(ours) : ours != formula) {
        f.record(i, 0, a, b, op, ours, formula, "float then the formula");
      }
      if (bf16_finite(a) && bf16_finite(b) && !(op == kDiv && (b & 0x7FFF) == 0)) {
        const uint16_t exact = uint16_t(exact_op(op, bf16_scaled(a), bf16_scaled(b), a >> 15, b >> 15, kExactBF16));
        if (ours != exact) f.record(i, 0, a, b, op, ours, exact, "the exact oracle");
      }
    }
  });
  INFO(failure);
  CHECK(failure.count == 0);
}

TEST_CASE("bfloat16 sqrt and fma and specials", "[precision][small_float]") {
  // sqrt(2) = 1.0110101000001...b: 1.0110101 (0x3FB5), the next bits 0000 are below half.
  CHECK(hex16(sqrt(bfloat16(2.0f)).bits()) == hex16(0x3FB5));
  CHECK(hex16(sqrt(bfloat16(-0.0f)).bits()) == hex16(0x8000));
  CHECK(sqrt(bfloat16(-1.0f)).is_nan());
  // (1 + 2^-7) * 1.5 = 1.5 + 3*2^-8: in [1,2) (ulp 2^-7) a tie between 0x3FC1 and 0x3FC2 (even);
  // c = -2^-133 (the smallest subnormal) puts it just below: 0x3FC1.
  CHECK(hex16(fma(bfloat16::from_bits(0x3F81), bfloat16(1.5f), bfloat16::from_bits(0x8001)).bits()) == hex16(0x3FC1));
  CHECK(hex16((bfloat16::from_bits(0x3F81) * bfloat16(1.5f)).bits()) == hex16(0x3FC2));
  const bfloat16 inf = std::numeric_limits<bfloat16>::infinity();
  CHECK((inf - inf).is_nan());
  CHECK(hex16((bfloat16(-0.0f) + bfloat16(-0.0f)).bits()) == hex16(0x8000));
  CHECK(hex16((bfloat16(3.0f) - bfloat16(3.0f)).bits()) == hex16(0x0000));
  CHECK(hex16((bfloat16(1.0f) / bfloat16(-0.0f)).bits()) == hex16(0xFF80));
  CHECK(hex16((std::numeric_limits<bfloat16>::max() * bfloat16(2.0f)).bits()) == hex16(0x7F80));
  // fp8 overflow follows the format: e4m3 has no inf (NaN), e5m2 does.
  CHECK((float8_e4m3(448.0f) + float8_e4m3(448.0f)).is_nan());
  CHECK(hex8((float8_e5m2(57344.0f) + float8_e5m2(57344.0f)).bits()) == hex8(0x7C));
  CHECK(hex8((float8_e4m3(1.0f) + float8_e4m3(0.0625f)).bits()) == hex8(0x38));  // tie to even
}

TEST_CASE("comparisons follow IEEE order: NaN is unordered and -0 == +0", "[precision][small_float]") {
  // A sample of 2048 patterns (2048 / kSweepStride in the sanitized tree) including every special,
  // checked against the order of an integer key (sign-magnitude to two's complement, both zeros
  // to 0).
  std::vector<uint16_t> sample = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
                                  0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7C01, 0x7E00, 0xFE00, 0xFFFF};
  std::mt19937 rng(5);
  while (sample.size() < 2048 / hg::testing::kSweepStride) sample.push_back(uint16_t(rng()));
  auto key = [](uint16_t b) { return (b & 0x8000) ? -int(b & 0x7FFF) : int(b); };
  int wrong = 0;
  for (uint16_t a : sample) {
    for (uint16_t b : sample) {
      const half x = half::from_bits(a), y = half::from_bits(b);
      const bool unordered = f16_nan(a) || f16_nan(b);
      const int ka = key(a), kb = key(b);
      const bool ok = (x == y) == (!unordered && ka == kb) && (x != y) == (unordered || ka != kb) &&
                      (x < y) == (!unordered && ka < kb) && (x <= y) == (!unordered && ka <= kb) &&
                      (x > y) == (!unordered && ka > kb) && (x >= y) == (!unordered && ka >= kb);
      if (!ok && wrong++ == 0) {
        INFO(hex16(a) << " vs " << hex16(b));
        CHECK(ok);
      }
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("classification of all 65536 half patterns", "[precision][small_float]") {
  int wrong = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const half h = half::from_bits(uint16_t(bits));
    const uint32_t field = bits >> 10 & 0x1F, mantissa = bits & 0x3FF;
    const bool ok = h.is_nan() == (field == 31 && mantissa != 0) && h.is_inf() == (field == 31 && mantissa == 0) &&
                    h.is_subnormal() == (field == 0 && mantissa != 0) && h.sign_bit() == (bits >= 0x8000) &&
                    (-h).bits() == (bits ^ 0x8000);
    if (!ok && wrong++ == 0) {
      INFO("half " << hex16(bits));
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);
}

namespace {

// Properties that define each numeric_limits member (C++ [numeric.limits.members]), checked by
// arithmetic rather than by repeating the header's formulas.
template <class T>
void check_limits_definitions() {
  using L = std::numeric_limits<T>;
  const double one_up = T::from_bits(typename T::storage_type(T(1.0f).bits() + 1)).to_double();
  CHECK(L::epsilon().to_double() == one_up - 1.0);
  CHECK(L::min().to_double() == std::ldexp(1.0, L::min_exponent - 1));
  CHECK(L::denorm_min().to_double() == std::ldexp(L::min().to_double(), -(L::digits - 1)));
  CHECK(L::max().to_double() < std::ldexp(1.0, L::max_exponent));
  CHECK(L::max().to_double() >= std::ldexp(1.0, L::max_exponent - 1));
  CHECK(std::pow(10.0, L::min_exponent10) >= L::min().to_double());
  CHECK(std::pow(10.0, L::min_exponent10 - 1) < L::min().to_double());
  CHECK(std::pow(10.0, L::max_exponent10) <= L::max().to_double());
  CHECK(std::pow(10.0, L::max_exponent10 + 1) > L::max().to_double());
  CHECK(L::digits10 == int(std::floor((L::digits - 1) * std::log10(2.0))));
  CHECK(L::max_digits10 == int(std::ceil(1 + L::digits * std::log10(2.0))));
  CHECK(L::lowest().to_double() == -L::max().to_double());
  CHECK(L::round_error().to_double() == 0.5);
  CHECK(L::quiet_NaN().is_nan());
  CHECK(L::signaling_NaN().is_nan());
  CHECK(L::has_infinity == L::infinity().is_inf());
  CHECK(L::radix == 2);
  CHECK(L::is_specialized);
  CHECK(L::is_signed);
  CHECK_FALSE(L::is_integer);
  CHECK_FALSE(L::is_exact);
  CHECK(L::is_bounded);
  CHECK(L::has_denorm == std::denorm_present);
  CHECK(L::round_style == std::round_to_nearest);
}

}  // namespace

TEST_CASE("numeric_limits<half> is IEEE binary16", "[precision][small_float]") {
  using L = std::numeric_limits<half>;
  check_limits_definitions<half>();
  CHECK(L::epsilon().to_double() == 0x1p-10);
  CHECK(L::min().to_double() == 0x1p-14);
  CHECK(L::denorm_min().to_double() == 0x1p-24);
  CHECK(L::max().to_double() == 65504.0);
  CHECK(hex16(L::max().bits()) == hex16(0x7BFF));
  CHECK(hex16(L::lowest().bits()) == hex16(0xFBFF));
  CHECK(hex16(L::infinity().bits()) == hex16(0x7C00));
  CHECK(hex16(L::quiet_NaN().bits()) == hex16(0x7E00));
  CHECK(hex16(L::signaling_NaN().bits()) == hex16(0x7C01));  // quiet bit 0x0200 clear
  CHECK(L::digits == 11);
  CHECK(L::digits10 == 3);
  CHECK(L::max_digits10 == 5);
  CHECK(L::min_exponent == -13);
  CHECK(L::max_exponent == 16);
  CHECK(L::min_exponent10 == -4);
  CHECK(L::max_exponent10 == 4);
  CHECK(L::has_infinity);
  CHECK(L::has_quiet_NaN);
  CHECK(L::has_signaling_NaN);
  CHECK(L::is_iec559);
}

TEST_CASE("numeric_limits of bfloat16 and the fp8 formats", "[precision][small_float]") {
  check_limits_definitions<bfloat16>();
  check_limits_definitions<float8_e4m3>();
  check_limits_definitions<float8_e5m2>();
  {
    using L = std::numeric_limits<bfloat16>;
    CHECK(L::epsilon().to_double() == 0x1p-7);
    CHECK(L::min().to_double() == 0x1p-126);
    CHECK(L::denorm_min().to_double() == 0x1p-133);
    CHECK(hex16(L::max().bits()) == hex16(0x7F7F));
    CHECK(L::max().to_double() == 0x1.FEp127);
    CHECK(hex16(L::infinity().bits()) == hex16(0x7F80));
    CHECK(hex16(L::quiet_NaN().bits()) == hex16(0x7FC0));
    CHECK(L::digits == 8);
    CHECK(L::digits10 == 2);
    CHECK(L::max_digits10 == 4);
    CHECK(L::min_exponent == -125);
    CHECK(L::max_exponent == 128);
    CHECK(L::min_exponent10 == -37);
    CHECK(L::max_exponent10 == 38);
    CHECK(L::has_infinity);
    CHECK_FALSE(L::is_iec559);
  }
  {
    using L = std::numeric_limits<float8_e4m3>;
    CHECK(L::epsilon().to_double() == 0x1p-3);
    CHECK(L::min().to_double() == 0x1p-6);
    CHECK(L::denorm_min().to_double() == 0x1p-9);
    CHECK(hex8(L::max().bits()) == hex8(0x7E));
    CHECK(L::max().to_double() == 448.0);
    CHECK(hex8(L::quiet_NaN().bits()) == hex8(0x7F));
    CHECK(L::digits == 4);
    CHECK(L::min_exponent == -5);
    CHECK(L::max_exponent == 9);  // 256 = 2^8 is the largest finite power of two
    CHECK_FALSE(L::has_infinity);
    CHECK_FALSE(L::has_signaling_NaN);
  }
  {
    using L = std::numeric_limits<float8_e5m2>;
    CHECK(L::epsilon().to_double() == 0x1p-2);
    CHECK(L::min().to_double() == 0x1p-14);
    CHECK(L::denorm_min().to_double() == 0x1p-16);
    CHECK(hex8(L::max().bits()) == hex8(0x7B));
    CHECK(L::max().to_double() == 57344.0);
    CHECK(hex8(L::infinity().bits()) == hex8(0x7C));
    CHECK(hex8(L::signaling_NaN().bits()) == hex8(0x7D));
    CHECK(L::digits == 3);
    CHECK(L::min_exponent == -13);
    CHECK(L::max_exponent == 16);
    CHECK(L::has_infinity);
  }
  // The definitions hold for float too, so they are the right definitions.
  CHECK(std::numeric_limits<float>::min_exponent10 == -37);
  CHECK(std::numeric_limits<float>::max_exponent10 == 38);
}

TEST_CASE("finfo matches torch.finfo's numbers", "[precision][small_float]") {
  using hg::precision::finfo;
  constexpr auto h = finfo<half>();
  CHECK(std::string(h.name) == "f16");
  CHECK(h.bits == 16);
  CHECK(h.mantissa_bits == 10);
  CHECK(h.exponent_bits == 5);
  CHECK(h.eps == 0x1p-10);
  CHECK(h.max == 65504.0);
  CHECK(h.smallest_normal == 0x1p-14);
  CHECK(h.smallest_subnormal == 0x1p-24);
  constexpr auto b = finfo<bfloat16>();
  CHECK(std::string(b.name) == "bf16");
  CHECK(b.eps == 0x1p-7);
  CHECK(b.max == 0x1.FEp127);
  CHECK(b.smallest_normal == 0x1p-126);
  CHECK(b.smallest_subnormal == 0x1p-133);
  constexpr auto e4 = finfo<float8_e4m3>();
  CHECK(std::string(e4.name) == "e4m3");
  CHECK(e4.bits == 8);
  CHECK(e4.max == 448.0);
  CHECK(e4.eps == 0.125);
  CHECK(e4.smallest_subnormal == 0x1p-9);
  constexpr auto e5 = finfo<float8_e5m2>();
  CHECK(e5.max == 57344.0);
  CHECK(e5.smallest_normal == 0x1p-14);
  constexpr auto f = finfo<float>();
  CHECK(std::string(f.name) == "f32");
  CHECK(f.eps == 0x1p-23);
  CHECK(f.smallest_subnormal == 0x1p-149);
  constexpr auto d = finfo<double>();
  CHECK(d.mantissa_bits == 52);
  CHECK(d.max == std::numeric_limits<double>::max());
}

TEST_CASE("describe and bit_fields spell out the bits", "[precision][small_float]") {
  using hg::precision::bit_fields;
  using hg::precision::describe;
  CHECK(describe(half(1.0)) == "1 (0x3c00 = 0|01111|0000000000)");
  CHECK(describe(half::from_bits(0x0400)) == "6.10351562e-05 (0x0400 = 0|00001|0000000000)");
  CHECK(describe(half::from_bits(0x0001)) == "5.96046448e-08 (0x0001 = 0|00000|0000000001)");
  CHECK(describe(-std::numeric_limits<half>::infinity()) == "-inf (0xfc00 = 1|11111|0000000000)");
  CHECK(describe(bfloat16(1.0)) == "1 (0x3f80 = 0|01111111|0000000)");
  CHECK(describe(float8_e4m3(448.0)) == "448 (0x7e = 0|1111|110)");
  CHECK(describe(float8_e5m2(-0.0)) == "-0 (0x80 = 1|00000|00)");
  CHECK(bit_fields(half(-2.0)) == "1|10000|0000000000");
  CHECK(bit_fields(half(65504.0)) == "0|11110|1111111111");
  std::ostringstream os;
  os << half(1.5) << " " << bfloat16(-3.0);
  CHECK(os.str() == "1.5 -3");
}
