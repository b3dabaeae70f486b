// Tests for halfgrad/autograd/kernels/accumulate.h, on every compiled Highway target: the f16 GEMM and
// sums equal, bit for bit, an oracle that rounds every exact sum once -- for f16 products
// halfgrad/precision/arithmetic.h's fma_bits (integer arithmetic, one rounding of a * b + acc) -- on
// random inputs, tails of the vector tiles, transposed and batched operands, and adversarial
// cases: a double-rounding trap, stagnation at large K, cancellation, subnormals, overflow to
// inf, NaN.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "halfgrad/autograd/kernels/accumulate.h"
#include "halfgrad/autograd/kernels/gemm.h"
#include "tests/autograd/kernels/kernel_test_util.h"
#include "halfgrad/precision/arithmetic.h"
#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/half.h"

namespace hg::kernels {
namespace {

using precision::kBinary16;
using test_util::for_each_target;
using test_util::hex;
using test_util::kInf;
using test_util::kNaN;

uint32_t f16_bits(float x) { return precision::encode<kBinary16>(double(x)); }
float f16_value(uint32_t bits) { return precision::decode<kBinary16>(bits); }

// The oracle of a GEMM element over f16 factors: each step is fma_bits, RN16(a * b + acc)
// computed exactly in integers; blocks restart the chain and add into an f32 carry.
float oracle_dot(const std::vector<float>& a, const std::vector<float>& b, Accumulation mode, float start = 0.0f) {
  const size_t block = mode == Accumulation::kF16Blocked ? size_t(kF16AccumulationBlock) : a.size() + 1;
  float carry = mode == Accumulation::kF16Blocked ? start : 0.0f;
  uint32_t acc = mode == Accumulation::kF16Blocked ? 0 : f16_bits(start);
  for (size_t p = 0; p < a.size(); ++p) {
    acc = precision::fma_bits(kBinary16, f16_bits(a[p]), f16_bits(b[p]), acc);
    if ((p + 1) % block == 0) {
      carry += f16_value(acc);
      acc = 0;
    }
  }
  if (mode != Accumulation::kF16Blocked) return f16_value(acc);
  return a.size() % block != 0 ? carry + f16_value(acc) : carry;
}

// The oracle of a sum of f32 terms: acc <- RN16(double(acc) + double(t)). That double sum,
// rounded to double and then to f16, is RN16 of the exact sum: acc is a multiple of 2^-24 below
// 2^16 and t = T 2^q (|T| < 2^24). If q >= -24 the exact sum is a multiple of 2^-24, exact in
// double below 2^29, and beyond 2^29 both roundings overflow f16. If q < -24 the sum is a
// multiple of 2^q; it is inexact in double only if |sum| >= 2^(53+q) > 2^29 |t|, i.e. |t| is
// below 2^-28 |acc|, while the f16 midpoints around acc are 2^-12 |acc| (or, subnormal, 2^-25)
// away: both values round to acc.
float oracle_sum(const std::vector<float>& terms, Accumulation mode) {
  const size_t block = mode == Accumulation::kF16Blocked ? size_t(kF16AccumulationBlock) : terms.size() + 1;
  float carry = 0.0f, acc = 0.0f;
  for (size_t p = 0; p < terms.size(); ++p) {
    acc = f16_value(precision::encode<kBinary16>(double(acc) + double(terms[p])));
    if ((p + 1) % block == 0) {
      carry += acc;
      acc = 0.0f;
    }
  }
  if (mode != Accumulation::kF16Blocked) return acc;
  return terms.size() % block != 0 ? carry + acc : carry;
}

bool same_bits(float x, float y) {
  return test_util::bits(x) == test_util::bits(y) || (std::isnan(x) && std::isnan(y));
}

constexpr Accumulation kModes[] = {Accumulation::kF16, Accumulation::kF16Blocked};

// f16 values: mixed signs, magnitudes 2^-8 .. 2^4.
std::vector<float> random_f16(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = float(half(normal(rng)));
  return v;
}

TEST_CASE("f16 accumulation: a GEMM equals the fma_bits oracle on every target, tails, transposes, batches",
          "[accumulate]") {
  std::mt19937 rng(7);
  struct Case {
    int64_t m, n, k;
  };
  // n around the tiles (8 or 4 vectors, single vectors, a padded tail on every width: 130 =
  // 128 + 2 on AVX-512); k around the block of 32, and 0.
  for (const Case c :
       {Case{1, 1, 1}, Case{3, 5, 31}, Case{9, 37, 32}, Case{5, 70, 65}, Case{3, 130, 70}, Case{2, 16, 0}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        // op(A) (m,k) and op(B) (k,n) as f16 bit patterns, stored transposed or not.
        const std::vector<float> a = random_f16(size_t(c.m * c.k), rng), b = random_f16(size_t(c.k * c.n), rng, 8.0f);
        std::vector<uint16_t> sa(a.size()), sb(b.size());
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t p = 0; p < c.k; ++p)
            sa[size_t(ta ? p * c.m + i : i * c.k + p)] = uint16_t(f16_bits(a[size_t(i * c.k + p)]));
        }
        for (int64_t p = 0; p < c.k; ++p) {
          for (int64_t j = 0; j < c.n; ++j)
            sb[size_t(tb ? j * c.k + p : p * c.n + j)] = uint16_t(f16_bits(b[size_t(p * c.n + j)]));
        }
        const GemmOperand oa{sa.data(), DType::f16, ta ? c.m : c.k, ta}, ob{sb.data(), DType::f16, tb ? c.k : c.n, tb};
        for (const Accumulation mode : kModes) {
          for (const bool accumulate : {false, true}) {
            std::vector<float> expected(size_t(c.m * c.n));
            std::vector<float> start(expected.size());
            for (size_t i = 0; i < start.size(); ++i) start[i] = float(half(0.25f * float(i % 7) - 0.5f));
            for (int64_t i = 0; i < c.m; ++i) {
              for (int64_t j = 0; j < c.n; ++j) {
                std::vector<float> row(a.begin() + i * c.k, a.begin() + (i + 1) * c.k), col(static_cast<size_t>(c.k));
                for (int64_t p = 0; p < c.k; ++p) col[size_t(p)] = b[size_t(p * c.n + j)];
                expected[size_t(i * c.n + j)] =
                    oracle_dot(row, col, mode, accumulate ? start[size_t(i * c.n + j)] : 0.0f);
              }
            }
            for_each_target([&] {
              std::vector<float> out = accumulate ? start : std::vector<float>(expected.size(), test_util::kSentinel);
              gemm(out.data(), c.n, oa, ob, c.m, c.n, c.k, {.accumulate = accumulate, .accumulation = mode});
              INFO("m " << c.m << " n " << c.n << " k " << c.k << " ta " << ta << " tb " << tb << " mode " << int(mode)
                        << " accumulate " << accumulate);
              for (size_t i = 0; i < out.size(); ++i) {
                INFO("element " << i << ": " << hex(out[i]) << " expected " << hex(expected[i]));
                REQUIRE(same_bits(out[i], expected[i]));
              }
            });
          }
        }
      }
    }
  }
  // A batch: each member its own product, as a batched gemm's f32 path.
  const std::vector<float> a = random_f16(2 * 3 * 40, rng), b = random_f16(2 * 40 * 5, rng);
  std::vector<uint16_t> sa(a.size()), sb(b.size());
  for (size_t i = 0; i < a.size(); ++i) sa[i] = uint16_t(f16_bits(a[i]));
  for (size_t i = 0; i < b.size(); ++i) sb[i] = uint16_t(f16_bits(b[i]));
  std::vector<float> out(2 * 3 * 5);
  gemm(out.data(), 5, {sa.data(), DType::f16, 40, false, 120}, {sb.data(), DType::f16, 5, false, 200}, 3, 5, 40,
       {.accumulation = Accumulation::kF16, .batch = 2, .c_batch_stride = 15});
  for (int64_t m = 0; m < 2; ++m) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 5; ++j) {
        std::vector<float> row(40), col(40);
        for (int64_t p = 0; p < 40; ++p) {
          row[size_t(p)] = a[size_t(m * 120 + i * 40 + p)];
          col[size_t(p)] = b[size_t(m * 200 + p * 5 + j)];
        }
        CHECK(same_bits(out[size_t(m * 15 + i * 5 + j)], oracle_dot(row, col, Accumulation::kF16)));
      }
    }
  }
}

TEST_CASE("f16 accumulation: adversarial chains equal the oracle, and the double-rounding trap is caught",
          "[accumulate]") {
  // 1 + a b with a b = 2^-11 (1 + 244 / 2^21) (a = 1044/1024, b = 2009/1024 2^-12, both f16):
  // just above the midpoint between 1 and 1 + 2^-10, so RN16 gives 1 + 2^-10; RN32 first lands
  // exactly on the midpoint and ties to even give 1. The kernel must give 1 + 2^-10.
  const float ta = 1044.0f / 1024.0f, tb = 2009.0f / 1024.0f / 4096.0f;
  REQUIRE(float(half(ta)) == ta);
  REQUIRE(float(half(tb)) == tb);
  REQUIRE(float(half(1.0f + ta * tb)) == 1.0f);  // the double rounding the kernel must avoid
  struct Chain {
    const char* name;
    std::vector<float> a, b;
  };
  std::vector<Chain> chains;
  chains.push_back({"double-rounding trap", {1.0f, ta}, {1.0f, tb}});
  // Stagnation: 4096 ones reach 2048, where the f16 spacing is 2, and stay there.
  chains.push_back({"stagnation", std::vector<float>(4096, 1.0f), std::vector<float>(4096, 1.0f)});
  // Cancellation: +-(1 + 2^-10) x 1000 alternating, then small terms.
  Chain cancel{"cancellation", {}, {}};
  for (int i = 0; i < 200; ++i) {
    cancel.a.push_back(i % 2 ? -1000.0f : 1000.0f);
    cancel.b.push_back(1.0f + 0.0009765625f * float(i % 5));
    cancel.a.push_back(0.0001f * float(i));
    cancel.b.push_back(float(half(0.3f)));
  }
  for (float& x : cancel.a) x = float(half(x));
  chains.push_back(cancel);
  // Subnormal products (2^-20 x 2^-8 = 2^-28, below f16's smallest subnormal 2^-24) and
  // subnormal sums: RN16 keeps or drops each.
  Chain tiny{"subnormals", {}, {}};
  for (int i = 0; i < 100; ++i) {
    tiny.a.push_back(std::ldexp(1.0f + float(i % 9) / 8.0f, -20 + i % 6));
    tiny.b.push_back(std::ldexp(i % 3 ? 1.0f : -1.0f, -8 + i % 4));
  }
  chains.push_back(tiny);
  // Near overflow: 200 x 200 = 40000, twice, is past 65520: inf, which finite terms keep.
  chains.push_back({"overflow", {200.0f, 200.0f, 1.0f}, {200.0f, 200.0f, 1.0f}});
  chains.push_back(
      {"overflow, then negative terms", {200.0f, 200.0f, -65504.0f, -65504.0f}, {200.0f, 200.0f, 1.0f, 1.0f}});
  chains.push_back({"inf input", {1.0f, kInf, 2.0f}, {1.0f, 1.0f, 1.0f}});
  chains.push_back({"NaN input", {1.0f, kNaN, 2.0f}, {1.0f, 1.0f, 1.0f}});
  chains.push_back({"0 x inf", {1.0f, 0.0f}, {1.0f, kInf}});
  // Near 65504: + 8 is 65512, below the overflow threshold 65520: stays 65504; + 16 reaches it:
  // a tie between 65504 and 2^16 (odd and even significands), so inf.
  chains.push_back({"threshold", {65504.0f, 8.0f, 8.0f, 16.0f}, {1.0f, 1.0f, 1.0f, 1.0f}});

  for (const Chain& ch : chains) {
    const int64_t k = int64_t(ch.a.size());
    std::vector<uint16_t> sa(ch.a.size()), sb(ch.b.size());
    for (size_t i = 0; i < sa.size(); ++i) sa[i] = uint16_t(f16_bits(ch.a[i]));
    for (size_t i = 0; i < sb.size(); ++i) sb[i] = uint16_t(f16_bits(ch.b[i]));
    for (const Accumulation mode : kModes) {
      const float expected = oracle_dot(ch.a, ch.b, mode);
      for_each_target([&] {
        float out = test_util::kSentinel;
        gemm(&out, 1, {sa.data(), DType::f16, k}, {sb.data(), DType::f16, 1}, 1, 1, k, {.accumulation = mode});
        INFO(ch.name << ", mode " << int(mode) << ": " << hex(out) << " expected " << hex(expected));
        REQUIRE(same_bits(out, expected));
      });
    }
  }
  float trap = 0;
  gemm(&trap, 1, {std::vector<uint16_t>{0x3C00, uint16_t(f16_bits(ta))}.data(), DType::f16, 2},
       {std::vector<uint16_t>{0x3C00, uint16_t(f16_bits(tb))}.data(), DType::f16, 1}, 1, 1, 2,
       {.accumulation = Accumulation::kF16});
  CHECK(trap == 1.0f + 0.0009765625f);
  float stagnated = 0;
  const std::vector<uint16_t> ones(4096, 0x3C00);
  gemm(&stagnated, 1, {ones.data(), DType::f16, 4096}, {ones.data(), DType::f16, 1}, 1, 1, 4096,
       {.accumulation = Accumulation::kF16});
  CHECK(stagnated == 2048.0f);  // 2048 + 1 is a tie between 2048 and 2050: even, 2048
  float blocked = 0;
  gemm(&blocked, 1, {ones.data(), DType::f16, 4096}, {ones.data(), DType::f16, 1}, 1, 1, 4096,
       {.accumulation = Accumulation::kF16Blocked});
  CHECK(blocked == 4096.0f);  // blocks of 32 ones are exact, and so is their f32 sum
}

TEST_CASE("f16 accumulation: row and column sums of f32 terms equal the round-once oracle", "[accumulate]") {
  std::mt19937 rng(11);
  // f32 terms that are not f16 values, over 2^-40 .. 2^12, plus huge and non-finite ones.
  std::uniform_real_distribution<float> exponent(-40.0f, 12.0f), sign(-1.0f, 1.0f);
  for (const int64_t c : {int64_t{1}, int64_t{17}, int64_t{33}, int64_t{200}}) {
    const int64_t n = 7;
    std::vector<float> x(size_t(n * c));
    for (float& v : x) v = std::copysign(std::exp2(exponent(rng)), sign(rng));
    if (c == 33) {  // an f16 overflow, an inf and a NaN, in three rows
      x[5] = 3e38f;
      x[40] = -kInf;
      x[70] = kNaN;
    }
    for (const Accumulation mode : kModes) {
      std::vector<float> rows_expected(static_cast<size_t>(n)), cols_expected(static_cast<size_t>(c));
      for (int64_t i = 0; i < n; ++i)
        rows_expected[size_t(i)] = oracle_sum({x.begin() + i * c, x.begin() + (i + 1) * c}, mode);
      for (int64_t j = 0; j < c; ++j) {
        std::vector<float> col(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) col[size_t(i)] = x[size_t(i * c + j)];
        cols_expected[size_t(j)] = oracle_sum(col, mode);
      }
      for_each_target([&] {
        std::vector<float> rows(size_t(n), test_util::kSentinel), cols(size_t(c), test_util::kSentinel);
        row_sums_f16(rows.data(), x.data(), n, c, mode);
        column_sums_f16(cols.data(), x.data(), n, c, c, mode);
        INFO("c " << c << " mode " << int(mode));
        for (int64_t i = 0; i < n; ++i) {
          INFO("row " << i << ": " << hex(rows[size_t(i)]) << " expected " << hex(rows_expected[size_t(i)]));
          REQUIRE(same_bits(rows[size_t(i)], rows_expected[size_t(i)]));
        }
        for (int64_t j = 0; j < c; ++j) {
          INFO("column " << j << ": " << hex(cols[size_t(j)]) << " expected " << hex(cols_expected[size_t(j)]));
          REQUIRE(same_bits(cols[size_t(j)], cols_expected[size_t(j)]));
        }
      });
    }
  }
  // The second oracle agrees with the first where both apply (f16 products are exact f32 terms).
  std::vector<float> a = random_f16(300, rng), b = random_f16(300, rng), products(300);
  for (size_t i = 0; i < a.size(); ++i) products[i] = a[i] * b[i];
  for (const Accumulation mode : kModes) CHECK(same_bits(oracle_sum(products, mode), oracle_dot(a, b, mode)));
}

}  // namespace
}  // namespace hg::kernels
