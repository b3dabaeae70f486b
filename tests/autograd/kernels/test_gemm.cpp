// Tests for halfgrad/autograd/kernels/gemm.h against the double-precision triple loop (reference_gemm.h),
// on every compiled Highway target the CPU supports: shapes around the register and cache
// blocks, transposes, dtypes, accumulate, sub-matrix views, batches, thread-count independence,
// the documented summation order (bit for bit), and inf/NaN propagation.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "halfgrad/autograd/kernels/gemm.h"
#include "halfgrad/autograd/kernels/reference_gemm.h"
#include "halfgrad/base/error.h"
#include "hwy/targets.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/half.h"
#include "tests/autograd/kernels/kernel_test_util.h"

namespace hg::kernels {
namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
using test_util::kInf;
using test_util::kNaN;
using test_util::kSentinel;

// A stored row-major (rows, cols) matrix of one dtype with row stride ld >= cols. The padding
// columns hold NaN, so a kernel that reads past a view's width poisons its result.
struct Stored {
  DType dtype;
  int64_t rows, cols, ld;
  std::vector<float> f;     // f32 elements
  std::vector<uint16_t> h;  // f16/bf16 bit patterns

  Stored(DType t, int64_t r, int64_t c, int64_t pad) : dtype(t), rows(r), cols(c), ld(c + pad) {
    if (t == DType::f32)
      f.assign(size_t(rows * ld), kNaN);
    else
      h.assign(size_t(rows * ld), t == DType::f16 ? uint16_t(0x7E00) : uint16_t(0x7FC0));
  }
  void set(int64_t r, int64_t c, float x) {  // rounds x to the dtype (nearest even)
    const size_t i = size_t(r * ld + c);
    if (dtype == DType::f32)
      f[i] = x;
    else
      h[i] = dtype == DType::f16 ? half(x).bits() : bfloat16(x).bits();
  }
  float get(int64_t r, int64_t c) const {
    const size_t i = size_t(r * ld + c);
    if (dtype == DType::f32) return f[i];
    return dtype == DType::f16 ? precision::decode<precision::kBinary16>(h[i])
                               : precision::decode<precision::kBFloat16>(h[i]);
  }
  const void* data() const { return dtype == DType::f32 ? static_cast<const void*>(f.data()) : h.data(); }
  GemmOperand operand(bool transposed) const { return {data(), dtype, ld, transposed}; }
  Stored abs() const {  // |x| elementwise: the sign bit cleared
    Stored a = *this;
    for (float& x : a.f) x = std::fabs(x);
    for (uint16_t& x : a.h) x &= 0x7FFF;
    return a;
  }
};

Stored random_stored(DType t, int64_t rows, int64_t cols, int64_t pad, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Stored s(t, rows, cols, pad);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) s.set(r, c, u(rng));
  }
  return s;
}

// C: (m, n) f32 with row stride n + pad; padding holds a sentinel that must survive.
std::vector<float> output(int64_t m, int64_t n, int64_t pad, float fill) {
  std::vector<float> c(size_t(m * (n + pad)), kSentinel);
  for (int64_t i = 0; i < m; ++i) std::fill_n(c.begin() + i * (n + pad), n, fill);
  return c;
}

struct Case {
  int64_t m, n, k;
  DType ta = DType::f32, tb = DType::f32;
  bool transpose_a = false, transpose_b = false;
  bool accumulate = false;
  int64_t pad = 0;  // extra elements per stored row of A, B and C (sub-matrix views)
};

std::string describe(const Case& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " " +
         std::string(dtype_name(c.ta)) + (c.transpose_a ? "^T" : "") + " * " + std::string(dtype_name(c.tb)) +
         (c.transpose_b ? "^T" : "") + (c.accumulate ? " accumulate" : "") + " pad " + std::to_string(c.pad);
}

// Runs gemm and the reference on one random case and checks every element against the bound
//   |gemm - reference| <= (k + 3) 2^-24 (|c0| + sum_p |a_ip b_pj|).
// Why: gemm sums k products (and c0) recursively in f32, each product rounded at most once and
// each addition once, so its distance to the exact sum is at most gamma_{k+1} S with
// gamma_j = j u / (1 - j u), u = 2^-24 (Higham, Accuracy and Stability, 3.1 and 3.5). The
// reference is the exact sum to within k 2^-53 S, rounded once to f32 (u |sum| <= u S). For
// k <= 513 the 1/(1 - j u) factor and the double error fit in the spare u S. The bound is about
// k u S; a dropped or doubled term (typically ~S/k) is far outside it.
void check_case(const Case& c, std::mt19937& rng) {
  INFO(describe(c));
  const Stored a =
      c.transpose_a ? random_stored(c.ta, c.k, c.m, c.pad, rng) : random_stored(c.ta, c.m, c.k, c.pad, rng);
  const Stored b =
      c.transpose_b ? random_stored(c.tb, c.n, c.k, c.pad, rng) : random_stored(c.tb, c.k, c.n, c.pad, rng);
  const int64_t ldc = c.n + c.pad;
  // Without accumulate C starts as NaN: the kernel must not read it.
  std::vector<float> got = output(c.m, c.n, c.pad, kNaN);
  if (c.accumulate) {
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) got[size_t(i * ldc + j)] = u(rng);
    }
  }
  std::vector<float> want = got, bound = got;
  for (float& x : bound) x = std::fabs(x);
  const GemmOptions options{.accumulate = c.accumulate};
  gemm(got.data(), ldc, a.operand(c.transpose_a), b.operand(c.transpose_b), c.m, c.n, c.k, options);
  reference_gemm(want.data(), ldc, a.operand(c.transpose_a), b.operand(c.transpose_b), c.m, c.n, c.k, options);
  const Stored a_abs = a.abs(), b_abs = b.abs();
  reference_gemm(bound.data(), ldc, a_abs.operand(c.transpose_a), b_abs.operand(c.transpose_b), c.m, c.n, c.k, options);
  const double u = std::ldexp(1.0, -24);
  int64_t bad = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t x = size_t(i * ldc + j);
      if (j >= c.n) {
        if (got[x] != kSentinel) ++bad;  // outside the view: untouched
        continue;
      }
      const double tolerance = double(c.k + 3) * u * double(bound[x]);
      if (!(std::fabs(double(got[x]) - double(want[x])) <= tolerance)) {
        if (bad++ < 5) {
          UNSCOPED_INFO("C(" << i << "," << j << ") = " << got[x] << ", reference " << want[x] << ", tolerance "
                             << tolerance);
        }
      }
    }
  }
  CHECK(bad == 0);
}

// Runs `body` once per compiled target this CPU supports, with dispatch forced to it.
void for_each_target(const std::function<void(int64_t)>& body) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << hwy::TargetName(target));
    body(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST_CASE("gemm matches the reference for every transpose and dtype pair", "[gemm][simd]") {
  for_each_target([](int64_t) {
    std::mt19937 rng(1);
    for (const DType ta : kDTypes) {
      for (const DType tb : kDTypes) {
        for (int t = 0; t < 4; ++t) {
          check_case({.m = 17,
                      .n = 65,
                      .k = 127,
                      .ta = ta,
                      .tb = tb,
                      .transpose_a = (t & 1) != 0,
                      .transpose_b = (t & 2) != 0},
                     rng);
        }
      }
    }
  });
}

// Sizes 1, 7, 17, 65, 127, 513 around the register tile (6x16 on AVX2), the vector width and
// the cache blocks (k 513 = 3 x 171, m 513 = 4 blocks of A, n 4100 > one block of B).
TEST_CASE("gemm handles odd shapes in every transpose", "[gemm][simd]") {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1},      {1, 17, 65},   {7, 1, 127},  {17, 65, 1},  {65, 7, 17},
                          {127, 17, 7},   {7, 127, 65},  {513, 7, 17}, {17, 513, 7}, {7, 17, 513},
                          {127, 65, 513}, {1, 513, 127}, {513, 1, 65}, {65, 127, 7}, {7, 4100, 17}};
  for_each_target([&](int64_t) {
    std::mt19937 rng(2);
    int rotate = 0;
    for (const Shape& s : shapes) {
      for (int t = 0; t < 4; ++t, ++rotate) {
        check_case({.m = s.m,
                    .n = s.n,
                    .k = s.k,
                    .ta = kDTypes[rotate % 3],
                    .tb = kDTypes[rotate / 3 % 3],
                    .transpose_a = (t & 1) != 0,
                    .transpose_b = (t & 2) != 0},
                   rng);
      }
    }
  });
}

TEST_CASE("gemm accumulates into C and reads sub-matrix views", "[gemm][simd]") {
  for_each_target([](int64_t) {
    std::mt19937 rng(3);
    int rotate = 0;
    for (const int64_t pad : {1, 3, 16}) {
      for (const bool accumulate : {false, true}) {
        for (int t = 0; t < 4; ++t, ++rotate) {
          check_case({.m = 23,
                      .n = 37,
                      .k = 300,
                      .ta = kDTypes[rotate % 3],
                      .tb = kDTypes[(rotate + 1) % 3],
                      .transpose_a = (t & 1) != 0,
                      .transpose_b = (t & 2) != 0,
                      .accumulate = accumulate,
                      .pad = pad},
                     rng);
        }
      }
    }
    check_case({.m = 7, .n = 17, .k = 1, .accumulate = true, .pad = 2}, rng);
  });
}

TEST_CASE("gemm with k = 0 writes zeros or leaves C as it was when accumulating", "[gemm]") {
  std::vector<float> c = output(3, 5, 2, 1.5f);
  const float unused = 0.0f;
  const GemmOperand a{&unused, DType::f32, 1}, b{&unused, DType::f32, 5};
  gemm(c.data(), 7, a, b, 3, 5, 0, {.accumulate = true});
  CHECK(c == output(3, 5, 2, 1.5f));
  gemm(c.data(), 7, a, b, 3, 5, 0);
  CHECK(c == output(3, 5, 2, 0.0f));
}

// GemmOptions::bias promises the bits of C filled with the bias rows and then accumulated into
// (what linear computed before the bias moved into the GEMM): both are the chain from bias[j].
// So each case is compared bit for bit (padding included) with that form of gemm itself, in
// every dtype, transpose and accumulation: one depth block and several (k = 513: 3 x 171), edge
// tiles, A read in place and packed (k = 1024), a product computed as C^T (n = 3 <= kMR: the bias
// then runs along the tile's rows), views, k = 0 (C = the bias rows), a batch sharing one bias,
// and 2 threads cutting C along M, along N and along C^T's N (each part offsets the bias).
TEST_CASE("gemm with a bias equals C filled with the bias and accumulated into, bit for bit", "[gemm][simd]") {
  struct BiasCase {
    int64_t batch, m, n, k;
    int threads;
  };
  const BiasCase cases[] = {{1, 1, 1, 1, 1},      {1, 17, 65, 127, 1},  {1, 13, 35, 513, 1}, {1, 14, 33, 300, 1},
                            {1, 13, 17, 1024, 1}, {1, 50, 3, 40, 1},    {1, 7, 5, 0, 1},     {3, 9, 20, 31, 1},
                            {1, 300, 40, 200, 2}, {1, 7, 1000, 320, 2}, {1, 2400, 3, 300, 2}};
  const Accumulation sums[] = {Accumulation::kF32, Accumulation::kF16, Accumulation::kF16Blocked};
  for_each_target([&](int64_t) {
    std::mt19937 rng(8);
    int rotate = 0;
    for (const BiasCase& s : cases) {
      for (int t = 0; t < 4; ++t, ++rotate) {
        if (s.threads > 1 && t != 0) continue;  // two threads (>= 2^22 flops): A, B as stored only
        const DType ta = kDTypes[rotate % 3], tb = kDTypes[rotate / 3 % 3];
        const bool transpose_a = (t & 1) != 0, transpose_b = (t & 2) != 0;
        // f16 chains once per shape (they take no target: one run suffices), small shapes only.
        const Accumulation accumulation = s.threads == 1 && t == 0 ? sums[rotate / 4 % 3] : Accumulation::kF32;
        const int64_t pad = rotate % 3, ldc = s.n + pad;
        INFO(s.batch << " x " << s.m << "x" << s.n << "x" << s.k << " " << dtype_name(ta) << (transpose_a ? "^T" : "")
                     << " * " << dtype_name(tb) << (transpose_b ? "^T" : "") << " pad " << pad << ", " << s.threads
                     << " threads, accumulation " << int(accumulation));
        const int64_t a_rows = transpose_a ? s.k : s.m, b_rows = transpose_b ? s.n : s.k;
        const Stored a = random_stored(ta, s.batch * a_rows, transpose_a ? s.m : s.k, pad, rng);
        const Stored b = random_stored(tb, s.batch * b_rows, transpose_b ? s.k : s.n, pad, rng);
        GemmOperand a_op = a.operand(transpose_a), b_op = b.operand(transpose_b);
        a_op.batch_stride = a_rows * a.ld;
        b_op.batch_stride = b_rows * b.ld;
        std::vector<float> bias(size_t(s.n));
        std::uniform_real_distribution<float> u(-4.0f, 4.0f);
        for (float& x : bias) x = u(rng);
        // C: batch x (m, ldc), padding = kSentinel; got starts as NaN (the kernel must not read it).
        std::vector<float> got, want;
        for (int64_t i = 0; i < s.batch; ++i) {
          const std::vector<float> c_got = output(s.m, s.n, pad, kNaN);
          got.insert(got.end(), c_got.begin(), c_got.end());
          std::vector<float> c_want = output(s.m, s.n, pad, 0.0f);
          for (int64_t r = 0; r < s.m; ++r) std::copy(bias.begin(), bias.end(), c_want.begin() + r * ldc);
          want.insert(want.end(), c_want.begin(), c_want.end());
        }
        const int saved = omp_get_max_threads();
        omp_set_num_threads(s.threads);
        gemm(got.data(), ldc, a_op, b_op, s.m, s.n, s.k,
             {.accumulation = accumulation, .bias = bias.data(), .batch = s.batch, .c_batch_stride = s.m * ldc});
        gemm(want.data(), ldc, a_op, b_op, s.m, s.n, s.k,
             {.accumulate = true, .accumulation = accumulation, .batch = s.batch, .c_batch_stride = s.m * ldc});
        omp_set_num_threads(saved);
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
      }
    }
  });
  std::vector<float> c(4, 0.0f);
  const float bias[2] = {1.0f, 2.0f}, unused = 0.0f;
  const GemmOperand a{&unused, DType::f32, 1}, b{&unused, DType::f32, 2};
  CHECK_THROWS_MATCHES(gemm(c.data(), 2, a, b, 2, 2, 0, {.accumulate = true, .bias = bias}), Error,
                       Catch::Matchers::Message("gemm: options.bias and options.accumulate together (C = bias + A B "
                                                "or C += A B, not both)"));
}

// The fp8 GEMM's epilogue: each finished element times the scale, then plus the output bias, two
// f32 roundings after the chain -- checked against the plain product scaled here, for a batch, with
// 1 and 2 threads, and the reference twin against its own plain product.
TEST_CASE("gemm with an output scale equals the plain product times the scale plus the output bias", "[gemm][simd]") {
  std::mt19937 rng(11);
  const int64_t batch = 2, m = 300, n = 40, k = 200, pad = 1, ldc = n + pad;
  const Stored a = random_stored(DType::f32, batch * m, k, pad, rng), b = random_stored(DType::f32, n, k, pad, rng);
  GemmOperand a_op = a.operand(false);
  a_op.batch_stride = m * a.ld;
  const GemmOperand b_op = b.operand(true);
  const float scale = 0.0625f * 1.3f;  // not a power of two: the product rounds
  std::vector<float> bias(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (float& x : bias) x = u(rng);
  for (const bool with_bias : {false, true}) {
    const GemmOptions plain{.batch = batch, .c_batch_stride = m * ldc};
    GemmOptions options = plain;
    options.output_scale = scale;
    options.output_bias = with_bias ? bias.data() : nullptr;
    std::vector<float> want(size_t(batch * m * ldc), kSentinel), ref_want = want;
    gemm(want.data(), ldc, a_op, b_op, m, n, k, plain);
    reference_gemm(ref_want.data(), ldc, a_op, b_op, m, n, k, plain);
    for (std::vector<float>* w : {&want, &ref_want}) {
      for (int64_t r = 0; r < batch * m; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          float& x = (*w)[size_t(r * ldc + j)];
          x *= scale;
          if (with_bias) x += bias[size_t(j)];
        }
      }
    }
    for (const int threads : {1, 2}) {
      INFO("bias " << with_bias << ", " << threads << " threads");
      std::vector<float> got(want.size(), kSentinel);
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      gemm(got.data(), ldc, a_op, b_op, m, n, k, options);
      omp_set_num_threads(saved);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
    std::vector<float> ref_got(want.size(), kSentinel);
    reference_gemm(ref_got.data(), ldc, a_op, b_op, m, n, k, options);
    CHECK(std::memcmp(ref_got.data(), ref_want.data(), ref_got.size() * sizeof(float)) == 0);
  }
  std::vector<float> c(4, 0.0f);
  const float unused = 0.0f;
  const GemmOperand x{&unused, DType::f32, 1}, y{&unused, DType::f32, 2};
  CHECK_THROWS_MATCHES(gemm(c.data(), 2, x, y, 2, 2, 0, {.accumulate = true, .output_scale = 2.0f}), Error,
                       Catch::Matchers::Message("gemm: options.output_scale with accumulate or bias (C = s A B [+ "
                                                "output_bias] starts from 0)"));
}

// hg::Error, like the rest of halfgrad, naming the argument at fault and its value.
TEST_CASE("gemm rejects negative sizes, null operands and short leading dimensions", "[gemm]") {
  using Catch::Matchers::Message;
  std::vector<float> x(64, 1.0f), c(64);
  const GemmOperand a{x.data(), DType::f32, 4}, b{x.data(), DType::f32, 4};
  CHECK_THROWS_MATCHES(gemm(c.data(), 4, a, b, -1, 4, 4), Error, Message("gemm: m = -1 is negative"));
  CHECK_THROWS_MATCHES(gemm(c.data(), 4, a, b, 4, 4, 5), Error,
                       Message("gemm: a.ld = 4 is less than the stored width 5"));
  CHECK_THROWS_MATCHES(gemm(c.data(), 3, a, b, 4, 4, 4), Error, Message("gemm: ldc = 3 is less than n = 4"));
  const GemmOperand null_b{nullptr, DType::f32, 4};
  CHECK_THROWS_MATCHES(gemm(c.data(), 4, a, null_b, 4, 4, 4), Error, Message("gemm: b.data is null"));
  CHECK_NOTHROW(gemm(c.data(), 4, a, null_b, 4, 4, 0));  // K = 0: B is empty, never read
}

TEST_CASE("a batched gemm matches one reference product per matrix", "[gemm][simd]") {
  for_each_target([](int64_t) {
    std::mt19937 rng(4);
    const int64_t batch = 5, m = 17, n = 33, k = 65, pad = 3;
    // A_i (m, k), ld k + pad, one after another with a gap (all of it finite); B (n, k)
    // transposed and shared by all (batch stride 0); C_i (m, n), ldc n + pad, with a gap.
    const int64_t a_stride = m * (k + pad) + 11, c_stride = m * (n + pad) + 5;
    const Stored a = random_stored(DType::f16, 1, batch * a_stride, 0, rng);
    const Stored b = random_stored(DType::bf16, n, k, pad, rng);
    for (const bool accumulate : {false, true}) {
      std::vector<float> got(size_t(batch * c_stride), 0.5f), want = got;
      const GemmOperand a_op{a.data(), DType::f16, k + pad, false, a_stride};
      const GemmOperand b_op{b.data(), DType::bf16, b.ld, true, 0};
      const GemmOptions options{.accumulate = accumulate, .batch = batch, .c_batch_stride = c_stride};
      gemm(got.data(), n + pad, a_op, b_op, m, n, k, options);
      reference_gemm(want.data(), n + pad, a_op, b_op, m, n, k, options);
      for (size_t x = 0; x < got.size(); ++x) {
        const double tolerance = (k + 3) * std::ldexp(1.0, -24) * (2 * 2 * k + 1);
        REQUIRE(std::fabs(got[x] - want[x]) <= tolerance);
      }
    }
  });
}

// Same bits with 1 and 2 threads: shapes that are cut along M, along N, along M of a product
// computed as C^T (n <= 6), and a batch of 3 that is cut into (matrix, part) tasks.
TEST_CASE("gemm gives the same bits for any thread count", "[gemm][simd]") {
  for_each_target([](int64_t) {
    std::mt19937 rng(5);
    struct Shape {
      int64_t batch, m, n, k;
    };
    for (const Shape s :
         {Shape{1, 300, 200, 300}, Shape{1, 7, 2000, 300}, Shape{1, 3000, 3, 300}, Shape{3, 96, 96, 96}}) {
      INFO(s.batch << " x " << s.m << "x" << s.n << "x" << s.k);
      const Stored a = random_stored(DType::f32, s.batch * s.m, s.k, 0, rng);
      const Stored b = random_stored(DType::f16, s.batch * s.n, s.k, 0, rng);
      GemmOperand a_op = a.operand(false), b_op = b.operand(true);
      a_op.batch_stride = s.m * s.k;
      b_op.batch_stride = s.n * s.k;
      std::vector<float> one(size_t(s.batch * s.m * s.n)), two(one.size());
      const int saved = omp_get_max_threads();
      omp_set_num_threads(1);
      gemm(one.data(), s.n, a_op, b_op, s.m, s.n, s.k, {.batch = s.batch, .c_batch_stride = s.m * s.n});
      omp_set_num_threads(2);
      gemm(two.data(), s.n, a_op, b_op, s.m, s.n, s.k, {.batch = s.batch, .c_batch_stride = s.m * s.n});
      omp_set_num_threads(saved);
      CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
    }
  });
}

// gemm.h promises that each element is the chain acc = acc + a_p b_p over p = 0..k-1 from c0 (or
// 0), fused where the target has FMA (AVX2, AVX-512), so any blocking gives these exact bits.
// f32 A as stored is read in place (two depth blocks at k = 300, an edge tile at m = 14),
// except with rows 4 KiB apart (k = 1024), where its rows are copied; bf16 A as stored is widened
// row by row (k = 513, and f16 at k = 37: vector tails), A^T is packed into panels (m = 150):
// all give the same bits.
TEST_CASE("gemm sums each element in the documented order bit for bit", "[gemm][simd]") {
  for_each_target([](int64_t target) {
    const bool fused = (target & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) != 0;
    std::mt19937 rng(6);
    for (const Case c :
         {Case{.m = 13, .n = 35, .k = 513, .ta = DType::bf16, .accumulate = true},
          Case{.m = 150, .n = 20, .k = 260, .tb = DType::f16, .transpose_a = true},
          Case{.m = 5, .n = 40, .k = 9, .transpose_b = true, .pad = 2},
          Case{.m = 14, .n = 33, .k = 300, .accumulate = true}, Case{.m = 13, .n = 17, .k = 1024, .transpose_b = true},
          Case{.m = 27, .n = 40, .k = 37, .ta = DType::f16, .pad = 3},
          Case{.m = 50, .n = 3, .k = 40, .ta = DType::f16, .transpose_a = true, .accumulate = true, .pad = 1}}) {
      INFO(describe(c));
      const Stored a =
          c.transpose_a ? random_stored(c.ta, c.k, c.m, c.pad, rng) : random_stored(c.ta, c.m, c.k, c.pad, rng);
      const Stored b =
          c.transpose_b ? random_stored(c.tb, c.n, c.k, c.pad, rng) : random_stored(c.tb, c.k, c.n, c.pad, rng);
      const int64_t ldc = c.n + c.pad;
      std::vector<float> got = output(c.m, c.n, c.pad, 0.25f);
      gemm(got.data(), ldc, a.operand(c.transpose_a), b.operand(c.transpose_b), c.m, c.n, c.k,
           {.accumulate = c.accumulate});
      int64_t bad = 0;
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          float acc = c.accumulate ? 0.25f : 0.0f;
          for (int64_t p = 0; p < c.k; ++p) {
            const float x = c.transpose_a ? a.get(p, i) : a.get(i, p);
            const float y = c.transpose_b ? b.get(j, p) : b.get(p, j);
            acc = fused ? std::fma(x, y, acc) : acc + x * y;
          }
          if (std::memcmp(&acc, &got[size_t(i * ldc + j)], sizeof(float)) != 0) ++bad;
        }
      }
      CHECK(bad == 0);
    }
  });
}

// An inf in row i of A makes every C(i, :) inf or NaN (inf * b, inf - inf), in every dtype; a
// NaN in column j of B makes C(:, j) NaN. Other elements stay finite. n = 3 is computed as C^T.
TEST_CASE("gemm propagates inf and NaN", "[gemm][simd]") {
  for_each_target([](int64_t) {
    std::mt19937 rng(7);
    const int64_t m = 20, k = 41, inf_row = 13;
    for (const int64_t n : {37, 3}) {
      for (const DType t : kDTypes) {
        for (const bool transposed : {false, true}) {
          INFO(dtype_name(t) << (transposed ? " transposed" : "") << ", n " << n);
          Stored a = transposed ? random_stored(t, k, m, 0, rng) : random_stored(t, m, k, 0, rng);
          Stored b = random_stored(t, k, n, 0, rng);
          const int64_t nan_col = n - 2;
          transposed ? a.set(29, inf_row, -kInf) : a.set(inf_row, 29, -kInf);
          b.set(7, nan_col, kNaN);
          std::vector<float> c(size_t(m * n));
          gemm(c.data(), n, a.operand(transposed), b.operand(false), m, n, k);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              const float x = c[size_t(i * n + j)];
              if (j == nan_col)
                CHECK(std::isnan(x));
              else if (i == inf_row)
                CHECK(!std::isfinite(x));
              else
                CHECK(std::isfinite(x));
            }
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace hg::kernels
