// Tests for halfgrad/autograd/kernels/gemm_bf16dot.h, the bf16 GEMM on VDPBF16PS.
//
// On every CPU: the choice of kernel (a pure function), the instruction's per-lane semantics as
// modelled by dpbf16_fma (hand-derived cases for the order, the fused steps, DAZ, FTZ and the
// odd-K pad), the packing and loop structure (the emulation kernel, which consumes the same
// packed panels as the instruction kernel, equals an independent triple loop bit for bit over
// shapes around the tile and cache blocks, transposes, views, batches, accumulation, threads,
// subnormal, inf and NaN inputs), and the error bound against the exact path on random data.
// On a CPU with AVX512_BF16 the same cases also run the instruction: bit-equal to the emulation
// and within the bound. Elsewhere that half is skipped with a warning; the emulation half still
// asserts everything above.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/kernels/gemm.h"
#include "halfgrad/autograd/kernels/gemm_bf16dot.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/float_format.h"

// A namespace of its own: the sanitized tree compiles test files together (unity build), and
// test_gemm.cpp has helpers of the same names.
namespace hg::kernels::bf16dot_tests {
namespace {

constexpr uint16_t kNaN16 = 0x7FC0;
constexpr float kSentinel = 12345.0f;

const char* const kNoInstruction =
    "VDPBF16PS was not run: this CPU has no AVX512_BF16 (grep avx512_bf16 /proc/cpuinfo). Only the "
    "emulation and the dispatch were tested; run this test on a CPU with the instruction";

uint16_t bf(float x) { return bfloat16(x).bits(); }
float widen(uint16_t x) { return precision::decode<precision::kBFloat16>(x); }

// Equal bits, or both NaN (which NaN payload survives is not part of the contract).
bool same(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::memcmp(&x, &y, sizeof x) == 0;
}

// A stored bf16 matrix (rows, cols) with row stride ld = cols + pad; the padding holds NaN, so a
// kernel reading past a view's width poisons its result.
struct Stored {
  int64_t rows, cols, ld;
  std::vector<uint16_t> h;
  Stored(int64_t r, int64_t c, int64_t pad) : rows(r), cols(c), ld(c + pad), h(size_t(r * (c + pad)), kNaN16) {}
  uint16_t& at(int64_t r, int64_t c) { return h[size_t(r * ld + c)]; }
  uint16_t at(int64_t r, int64_t c) const { return h[size_t(r * ld + c)]; }
};

struct Case {
  int64_t m, n, k;
  bool transpose_a = false, transpose_b = false, accumulate = false;
  int64_t pad = 0, batch = 1;
  bool specials = false;  // subnormal, tiny, huge, inf and NaN inputs (and C values)
  bool bias = false;      // C = bias + A B (GemmOptions::bias, one value per column, shared by the batch)
};

std::string describe(const Case& c) {
  return std::to_string(c.batch) + " x " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         (c.transpose_a ? " A^T" : "") + (c.transpose_b ? " B^T" : "") + (c.accumulate ? " accumulate" : "") + " pad " +
         std::to_string(c.pad) + (c.specials ? " specials" : "") + (c.bias ? " bias" : "");
}

// Bits that exercise every branch of the model: bf16 subnormals (read as zeros), the smallest
// normal, values whose products fall below 2^-126 (flushed) or overflow, zeros of both signs,
// infinities, NaN, and ordinary values.
uint16_t special_value(std::mt19937& rng) {
  static const uint16_t pool[] = {0x0001, 0x8040, 0x007F, 0x0080, 0x8080, 0x1F80 /* 2^-64 */,
                                  0x9F00, 0x7F00, 0xFF7F, 0x0000, 0x8000, 0x7F80,
                                  0xFF80, kNaN16, 0x3F80, 0xBFC0};
  std::uniform_int_distribution<int> pick(0, 2 * int(std::size(pool)) - 1);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const int i = pick(rng);
  return i < int(std::size(pool)) ? pool[i] : bf(u(rng));  // half of them ordinary
}

// The batch of stored A_i (m, k) or (k, m), B_i (k, n) or (n, k), one after another, and C.
struct Problem {
  Case c;
  std::vector<Stored> a, b;
  std::vector<float> c0;    // batch x m x (n + pad), padding = kSentinel
  std::vector<float> bias;  // n values
  int64_t ldc, c_stride;

  Problem(const Case& cs, std::mt19937& rng) : c(cs), ldc(cs.n + cs.pad), c_stride(cs.m * (cs.n + cs.pad)) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    const auto fill = [&](Stored& s) {
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t col = 0; col < s.cols; ++col) s.at(r, col) = c.specials ? special_value(rng) : bf(u(rng));
      }
    };
    for (int64_t i = 0; i < c.batch; ++i) {
      a.emplace_back(c.transpose_a ? c.k : c.m, c.transpose_a ? c.m : c.k, c.pad);
      b.emplace_back(c.transpose_b ? c.n : c.k, c.transpose_b ? c.k : c.n, c.pad);
      fill(a.back());
      fill(b.back());
    }
    c0.assign(size_t(c.batch * c_stride), kSentinel);
    const float c_specials[] = {0x1p-130f, -0x1p-149f, -0.0f, 0x1p-126f, 3e38f, 1.5f};
    for (int64_t i = 0; i < c.batch; ++i) {
      for (int64_t r = 0; r < c.m; ++r) {
        for (int64_t j = 0; j < c.n; ++j) {
          // Without accumulate C starts as NaN: the kernel must not read it.
          float& x = c0[size_t(i * c_stride + r * ldc + j)];
          x = !c.accumulate ? std::nanf("") : c.specials && (r + j) % 3 == 0 ? c_specials[(r + 2 * j) % 6] : u(rng);
        }
      }
    }
    for (int64_t j = 0; j < c.n; ++j) bias.push_back(c.specials && j % 3 == 0 ? c_specials[j % 6] : u(rng));
  }
  uint16_t a_at(int64_t i, int64_t r, int64_t p) const {
    return c.transpose_a ? a[size_t(i)].at(p, r) : a[size_t(i)].at(r, p);
  }
  uint16_t b_at(int64_t i, int64_t p, int64_t j) const {
    return c.transpose_b ? b[size_t(i)].at(j, p) : b[size_t(i)].at(p, j);
  }

  // The batch laid out as a batched gemm reads it: the matrices of A (and of B) one after another.
  std::vector<uint16_t> flat(const std::vector<Stored>& xs) const {
    std::vector<uint16_t> out;
    for (const Stored& s : xs) out.insert(out.end(), s.h.begin(), s.h.end());
    return out;
  }

  // C from the batched gemm under `mode`.
  std::vector<float> run(Bf16Dot mode) const {
    const std::vector<uint16_t> fa = flat(a), fb = flat(b);
    const GemmOperand a_op{fa.data(), DType::bf16, a[0].ld, c.transpose_a, int64_t(a[0].h.size())};
    const GemmOperand b_op{fb.data(), DType::bf16, b[0].ld, c.transpose_b, int64_t(b[0].h.size())};
    std::vector<float> out = c0;
    ScopedBf16Dot scope(mode);
    gemm(out.data(), ldc, a_op, b_op, c.m, c.n, c.k,
         {.accumulate = c.accumulate,
          .bias = c.bias ? bias.data() : nullptr,
          .batch = c.batch,
          .c_batch_stride = c_stride});
    return out;
  }

  // The oracle: each element written out from the SDM's per-lane order, with no packing or
  // blocking: from c0 (or the bias, or 0), pairs p = 0, 1, ... of k, the odd member first (a +0 pad past an
  // odd K), each step one dpbf16_fma, with the B element as the instruction's src1.
  std::vector<float> oracle() const {
    std::vector<float> out = c0;
    for (int64_t i = 0; i < c.batch; ++i) {
      for (int64_t r = 0; r < c.m; ++r) {
        for (int64_t j = 0; j < c.n; ++j) {
          float& x = out[size_t(i * c_stride + r * ldc + j)];
          float acc = c.bias ? bias[size_t(j)] : c.accumulate ? x : 0.0f;
          for (int64_t p = 0; p < c.k; p += 2) {
            const bool odd = p + 1 < c.k;
            acc = dpbf16_fma(acc, odd ? b_at(i, p + 1, j) : uint16_t(0), odd ? a_at(i, r, p + 1) : uint16_t(0));
            acc = dpbf16_fma(acc, b_at(i, p, j), a_at(i, r, p));
          }
          x = acc;
        }
      }
    }
    return out;
  }
};

// Elements where got and want differ (bits, NaN = NaN), padding included; reports the first few.
int64_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  int64_t bad = 0;
  for (size_t x = 0; x < got.size(); ++x) {
    if (!same(got[x], want[x]) && bad++ < 5) {
      UNSCOPED_INFO("element " << x << ": got " << got[x] << ", want " << want[x]);
    }
  }
  return bad;
}

// Runs the emulation against the oracle and, where the CPU has it, the instruction against the
// emulation. Returns whether the instruction ran.
bool check_bits(const Case& c, std::mt19937& rng) {
  INFO(describe(c));
  const Problem problem(c, rng);
  const std::vector<float> emulated = problem.run(Bf16Dot::kEmulated);
  CHECK(mismatches(emulated, problem.oracle()) == 0);
  if (!cpu_has_bf16_dot()) return false;
  CHECK(mismatches(problem.run(Bf16Dot::kAuto), emulated) == 0);
  return true;
}

void report_instruction(bool ran) {
  if (ran) {
    SUCCEED("VDPBF16PS ran on this CPU and matched the emulation");
  } else {
    WARN(kNoInstruction);
  }
}

TEST_CASE("gemm's engine is chosen from the dtypes, the sums, the bf16 mode and the CPU", "[gemm][bf16dot]") {
  using E = GemmEngine;
  constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};
  for (const bool cpu : {false, true}) {
    INFO("cpu has the instruction: " << cpu);
    CHECK(choose_gemm_engine(DType::bf16, DType::bf16, Accumulation::kF32, Bf16Dot::kAuto, cpu) ==
          (cpu ? E::kBf16Dot : E::kPacked));
    CHECK(choose_gemm_engine(DType::bf16, DType::bf16, Accumulation::kF32, Bf16Dot::kExact, cpu) == E::kPacked);
    CHECK(choose_gemm_engine(DType::bf16, DType::bf16, Accumulation::kF32, Bf16Dot::kEmulated, cpu) ==
          E::kBf16DotEmulated);
    for (const Bf16Dot mode : {Bf16Dot::kAuto, Bf16Dot::kExact, Bf16Dot::kEmulated}) {
      for (const DType a : kDtypes) {
        for (const DType b : kDtypes) {
          INFO(dtype_name(a) << " x " << dtype_name(b) << ", mode " << int(mode));
          // f16 sums always run the chains, whatever the operands and the mode.
          for (const Accumulation f16 : {Accumulation::kF16, Accumulation::kF16Blocked}) {
            CHECK(choose_gemm_engine(a, b, f16, mode, cpu) == E::kF16Chains);
          }
          // f32 sums with any operand not bf16: the packed kernel.
          if (a != DType::bf16 || b != DType::bf16) {
            CHECK(choose_gemm_engine(a, b, Accumulation::kF32, mode, cpu) == E::kPacked);
          }
        }
      }
    }
  }
  // HALFGRAD_EXACT_BF16's values; a wrong one names the variable.
  CHECK(bf16_dot_from_environment(nullptr) == Bf16Dot::kAuto);
  CHECK(bf16_dot_from_environment("0") == Bf16Dot::kAuto);
  CHECK(bf16_dot_from_environment("1") == Bf16Dot::kExact);
  CHECK_THROWS_WITH(bf16_dot_from_environment("yes"), Catch::StartsWith("HALFGRAD_EXACT_BF16 = 'yes': expected 1"));
  // Asked for directly, the instruction on a CPU without it is an error, not a crash.
  if (!cpu_has_bf16_dot()) {
    float c = 0.0f;
    const uint16_t one = 0x3F80;
    const GemmOperand x{&one, DType::bf16, 1};
    CHECK_THROWS_WITH(gemm_bf16dot_part(GemmEngine::kBf16Dot, &c, 1, x, x, 1, 1, 1, false, nullptr, 0, 1),
                      Catch::Contains("this CPU has no AVX512_BF16"));
  }
  // The scope sets the mode and restores what was in force before it.
  const Bf16Dot before = bf16_dot_mode();
  {
    ScopedBf16Dot exact(Bf16Dot::kExact);
    CHECK(bf16_dot_mode() == Bf16Dot::kExact);
    {
      ScopedBf16Dot emulated(Bf16Dot::kEmulated);
      CHECK(bf16_dot_mode() == Bf16Dot::kEmulated);
    }
    CHECK(bf16_dot_mode() == Bf16Dot::kExact);
  }
  CHECK(bf16_dot_mode() == before);
}

// One instruction on one lane through the whole GEMM: C (1x1) = acc, A = [x0 x1], B = [y0; y1],
// so the lane does acc += x1 y1, then acc += x0 y0. Each expected value is derived in its comment.
TEST_CASE("bf16 dot: one lane follows the SDM's order, fused steps, DAZ and FTZ", "[gemm][bf16dot]") {
  struct Lane {
    const char* what;
    float acc, x0, y0, x1, y1, want;
    int64_t k = 2;
  };
  const Lane lanes[] = {
      // Odd member first: 1 + 1 (-1) = 0, then 0 + 2^-30 = 2^-30 (even member first would
      // give RN(1 + 2^-30) = 1, then 0).
      {"odd member first", 1.0f, 0x1p-30f, 1.0f, 1.0f, -1.0f, 0x1p-30f},
      // Two roundings: RN(2^-30 + 1) = 1, then 1 - 1 = 0; the exact sum, or the two products
      // added first (1 - 1 = 0, then 2^-30), would give 2^-30.
      {"two rounded steps", 0x1p-30f, 1.0f, -1.0f, 1.0f, 1.0f, 0.0f},
      // x1 = 2^-133 is a bf16 subnormal, read as 0: 0 + 0 x 2^127 = 0 (not 2^-6).
      {"subnormal bf16 input", 0.0f, 0.0f, 0.0f, 0x1p-133f, 0x1p127f, 0.0f},
      // 2^-126 x 0.5 = 2^-127 is subnormal after rounding: flushed to +0.
      {"subnormal result", 0.0f, 0.0f, 0.0f, 0x1p-126f, 0.5f, 0.0f},
      // acc = 2^-127 is an f32 subnormal, read as 0: 0 + 2^-126 = 2^-126 (not 1.5 x 2^-126).
      {"subnormal accumulator", 0x1p-127f, 0.0f, 0.0f, 0x1p-126f, 1.0f, 0x1p-126f},
      // 2^-126 - 1.5 x 2^-151 rounds to 2^-126 on the subnormal grid (spacing 2^-149) but to
      // 2^-126 - 2^-150 with 24 bits and an unbounded exponent: tiny after rounding, flushed.
      {"tiny after rounding", 0x1p-126f, 0.0f, 0.0f, 0x1.8p-75f, -0x1p-76f, 0.0f},
      // 2^-126 - 2^-151 is the midpoint; the tie goes to the even 2^-126: not tiny, kept.
      {"midpoint below 2^-126", 0x1p-126f, 0.0f, 0.0f, 0x1p-75f, -0x1p-76f, 0x1p-126f},
      // 2^-126 - 2^-152 rounds up to 2^-126 on either grid: kept.
      {"just below 2^-126", 0x1p-126f, 0.0f, 0.0f, 0x1p-76f, -0x1p-76f, 0x1p-126f},
      // K = 1: the pad (+0 x +0) comes first and turns acc = -0 into +0; then +0 + (-1)(0) =
      // +0 + -0 = +0, where the exact chain gives -0 + -0 = -0.
      {"odd K pad first", -0.0f, -1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1},
      // 3e38 + 2^127 x 2 overflows to inf; inf + (-1)(2^-30) = inf.
      {"overflow", 3e38f, -1.0f, 0x1p-30f, 0x1p127f, 2.0f, INFINITY},
      // inf x 0 is NaN, and NaN stays.
      {"inf times zero", 1.0f, 1.0f, 1.0f, INFINITY, 0.0f, NAN},
  };
  bool ran = false;
  for (const Lane& lane : lanes) {
    INFO(lane.what);
    // The inputs are bf16 values (exact), so the derivations above hold for the stored bits.
    REQUIRE(widen(bf(lane.x1)) == lane.x1);
    REQUIRE((std::isnan(widen(bf(lane.y1))) || widen(bf(lane.y1)) == lane.y1));
    const uint16_t a[2] = {bf(lane.x0), bf(lane.x1)}, b[2] = {bf(lane.y0), bf(lane.y1)};
    const GemmOperand a_op{a, DType::bf16, 2}, b_op{b, DType::bf16, 1};
    for (const bool instruction : {false, true}) {
      if (instruction && !cpu_has_bf16_dot()) continue;
      INFO((instruction ? "VDPBF16PS" : "emulation"));
      ScopedBf16Dot scope(instruction ? Bf16Dot::kAuto : Bf16Dot::kEmulated);
      float c = lane.acc;
      gemm(&c, 1, a_op, b_op, 1, 1, lane.k, {.accumulate = true});
      CHECK(same(c, lane.want));
      ran = ran || instruction;
    }
  }
  report_instruction(ran);
}

TEST_CASE("bf16 dot: packing and loops equal the per-lane oracle over shapes, views, batches and specials",
          "[gemm][bf16dot]") {
  std::mt19937 rng(17);
  bool ran = false;
  // K: 0, 1, 2, 3 (no pair, one, one padded), odd and even around the k block (257: blocks of 130
  // and 127, the second padded), 513; M, N around the 12 x 32 tile and the 144-row block.
  const Case cases[] = {
      {.m = 1, .n = 1, .k = 1},
      {.m = 3, .n = 5, .k = 0, .accumulate = true},
      {.m = 3, .n = 5, .k = 0},
      {.m = 13, .n = 33, .k = 2, .transpose_b = true},
      {.m = 12, .n = 32, .k = 3, .transpose_a = true, .accumulate = true},
      {.m = 25, .n = 31, .k = 257, .transpose_a = true, .transpose_b = true, .pad = 3},
      {.m = 150, .n = 7, .k = 9, .accumulate = true, .pad = 1},
      {.m = 5, .n = 65, .k = 513, .transpose_b = true},
      {.m = 7, .n = 17, .k = 64, .accumulate = true, .pad = 2, .batch = 3},
      {.m = 2, .n = 4100, .k = 3, .transpose_a = true},
      {.m = 19, .n = 40, .k = 37, .specials = true},
      {.m = 14,
       .n = 35,
       .k = 36,
       .transpose_a = true,
       .transpose_b = true,
       .accumulate = true,
       .pad = 2,
       .specials = true},
      {.m = 9, .n = 20, .k = 11, .accumulate = true, .batch = 2, .specials = true},
      {.m = 3, .n = 5, .k = 0, .bias = true},
      {.m = 13, .n = 37, .k = 259, .transpose_b = true, .pad = 1, .bias = true},
      {.m = 7, .n = 17, .k = 9, .transpose_a = true, .batch = 2, .bias = true},
      {.m = 14, .n = 35, .k = 36, .pad = 2, .specials = true, .bias = true},
  };
  for (const Case& c : cases) ran = check_bits(c, rng) || ran;
  report_instruction(ran);
}

// GemmOptions::bias promises the bits of C filled with the bias rows and accumulated into: in this
// kernel's order too, both chains start from bias[j]. Both forms run through the same packing and
// tiles (the emulation, and the instruction where the CPU has it); views, an odd K over two
// depth blocks, a batch sharing the bias, K = 0 and specials in the bias and the inputs.
TEST_CASE("bf16 dot: a bias equals C filled with the bias and accumulated into, bit for bit", "[gemm][bf16dot]") {
  std::mt19937 rng(20);
  bool ran = false;
  for (const Case& c :
       {Case{.m = 13, .n = 37, .k = 259, .transpose_a = true, .pad = 1, .bias = true},
        Case{.m = 5, .n = 40, .k = 0, .bias = true},
        Case{.m = 9, .n = 20, .k = 11, .transpose_b = true, .batch = 2, .specials = true, .bias = true}}) {
    INFO(describe(c));
    const Problem with_bias(c, rng);
    Problem filled = with_bias;  // the same inputs, C = the bias rows, accumulated into
    filled.c.bias = false;
    filled.c.accumulate = true;
    for (int64_t i = 0; i < c.batch; ++i) {
      for (int64_t r = 0; r < c.m; ++r) {
        std::copy(with_bias.bias.begin(), with_bias.bias.end(),
                  filled.c0.begin() + i * filled.c_stride + r * filled.ldc);
      }
    }
    for (const Bf16Dot mode : {Bf16Dot::kEmulated, Bf16Dot::kAuto}) {
      if (mode == Bf16Dot::kAuto && !cpu_has_bf16_dot()) continue;
      ran = ran || mode == Bf16Dot::kAuto;
      CHECK(mismatches(with_bias.run(mode), filled.run(mode)) == 0);
    }
  }
  report_instruction(ran);
}

// Thread-count independence: shapes cut along M and along N (in tiles of 12 rows, 32 columns),
// each just large enough (>= 2^22 flops) for a batched gemm to use two threads; the cut along N
// with a bias (each part reads its own columns' values). (How a batch is cut into (matrix, part)
// tasks is the batched gemm's, shared with the exact path and tested there.)
TEST_CASE("bf16 dot: the same bits with 1 and 2 threads", "[gemm][bf16dot]") {
  std::mt19937 rng(18);
  const int saved = omp_get_max_threads();
  bool ran = false;
  for (const Case& c :
       {Case{.m = 150, .n = 30, .k = 470}, Case{.m = 13, .n = 340, .k = 475, .transpose_b = true, .bias = true}}) {
    INFO(describe(c));
    const Problem problem(c, rng);
    for (const Bf16Dot mode : {Bf16Dot::kEmulated, Bf16Dot::kAuto}) {
      if (mode == Bf16Dot::kAuto && !cpu_has_bf16_dot()) continue;
      ran = ran || mode == Bf16Dot::kAuto;
      omp_set_num_threads(1);
      const std::vector<float> one = problem.run(mode);
      omp_set_num_threads(2);
      const std::vector<float> two = problem.run(mode);
      CHECK(mismatches(one, two) == 0);
    }
  }
  omp_set_num_threads(saved);
  report_instruction(ran);
}

// The bound of gemm_bf16dot.h against the exact path g, per element:
//   |d - g| <= 2 gamma_K S + D + (K + 2) 2^-125,  gamma_K = K u / (1 - K u), u = 2^-24,
// S = |c0| + sum_k |a_k b_k|, D = the sum of |a_k b_k| over terms with a subnormal bf16 factor.
// On these random bf16 values in [-2, 2] D is 0 and the flushing term negligible. The test also
// requires that the two orders do differ somewhere (else it would compare a path with itself).
TEST_CASE("bf16 dot: within the derived bound of the exact path on random data", "[gemm][bf16dot]") {
  std::mt19937 rng(19);
  bool ran = false;
  int64_t compared = 0, differ = 0;
  for (const Case& c : {Case{.m = 9, .n = 33, .k = 1}, Case{.m = 9, .n = 33, .k = 3, .accumulate = true},
                        Case{.m = 20, .n = 40, .k = 255, .transpose_b = true},
                        Case{.m = 16, .n = 48, .k = 600, .transpose_a = true, .accumulate = true}}) {
    INFO(describe(c));
    const Problem problem(c, rng);
    const std::vector<float> exact = problem.run(Bf16Dot::kExact);
    std::vector<std::vector<float>> dots = {problem.run(Bf16Dot::kEmulated)};
    if (cpu_has_bf16_dot()) dots.push_back(problem.run(Bf16Dot::kAuto));
    ran = ran || dots.size() == 2;
    const double u = std::ldexp(1.0, -24), gamma = double(c.k) * u / (1.0 - double(c.k) * u);
    for (int64_t r = 0; r < c.m; ++r) {
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t x = size_t(r * problem.ldc + j);
        double s = c.accumulate ? std::fabs(double(problem.c0[x])) : 0.0, dropped = 0.0;
        for (int64_t p = 0; p < c.k; ++p) {
          const uint16_t ap = problem.a_at(0, r, p), bp = problem.b_at(0, p, j);
          const double t = std::fabs(double(widen(ap)) * double(widen(bp)));
          s += t;
          if (std::fpclassify(widen(ap)) == FP_SUBNORMAL || std::fpclassify(widen(bp)) == FP_SUBNORMAL) dropped += t;
        }
        const double bound = 2 * gamma * s + dropped + double(c.k + 2) * std::ldexp(1.0, -125);
        for (const std::vector<float>& d : dots) {
          ++compared;
          if (!(std::fabs(double(d[x]) - double(exact[x])) <= bound)) {
            FAIL_CHECK("C(" << r << "," << j << ") = " << d[x] << ", exact path " << exact[x] << ", bound " << bound);
          }
        }
        differ += exact[x] != dots[0][x];
      }
    }
  }
  CHECK(compared > 0);
  CHECK(differ > 0);
  report_instruction(ran);
}

// The ops reach the kernel through gemm(), under the mode in force. x = [1, 0, 2^-24, -1] times
// w = ones(4, 1): products 1, 0, 2^-24, -1. The exact chain: 1, 1, RN(1 + 2^-24) = 1 (a tie, to
// even), 1 - 1 = 0. VDPBF16PS's order 1, 0, 3, 2: 0, 0 + 1 = 1, 1 - 1 = 0, 0 + 2^-24 = 2^-24
// (a bf16 value, so the output's rounding keeps it).
TEST_CASE("bf16 dot: matmul under bf16 autocast runs the kernel the mode chooses", "[gemm][bf16dot]") {
  const Tensor x = Tensor::from_vector({1.0f, 0.0f, 0x1p-24f, -1.0f}, {1, 4}), w = Tensor::ones({4, 1});
  const auto product = [&](Bf16Dot mode) {
    ScopedBf16Dot scope(mode);
    Autocast autocast({.dtype = DType::bf16});
    const Tensor y = matmul(x, w);
    REQUIRE(y.dtype() == DType::bf16);
    return y.to_vector()[0];
  };
  CHECK(product(Bf16Dot::kExact) == 0.0f);
  CHECK(product(Bf16Dot::kEmulated) == 0x1p-24f);
  const bool instruction = cpu_has_bf16_dot();
  CHECK(product(Bf16Dot::kAuto) == (instruction ? 0x1p-24f : 0.0f));
  // f16 operands take the exact path whatever the mode.
  ScopedBf16Dot scope(Bf16Dot::kEmulated);
  Autocast autocast({.dtype = DType::f16});
  CHECK(matmul(x, w).to_vector()[0] == 0.0f);
  report_instruction(instruction);
}

}  // namespace
}  // namespace hg::kernels::bf16dot_tests
