// The accumulation of an Autocast guard reaches every GEMM and sum, in forward and in backward
// (captured when the op ran, so a backward outside the guard still uses it). Each check sums 4096
// ones, whose f16 chain stagnates at 2048 (2048 + 1 is a tie between 2048 and 2050: even,
// 2048), while f32 and f16 blocks of 32 with an f32 carry (each block exactly 32) give 4096: a
// path the mode did not reach gives 4096 instead of 2048. The head products' backward and the
// label-smoothing sum use chains derived beside them, which give a different value in each of the
// three modes. The kernels' bits are tested against an oracle in
// tests/autograd/kernels/test_accumulate.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/precision/half.h"

namespace hg {
namespace {

constexpr int64_t kLong = 4096;

float expected(Accumulation mode) { return mode == Accumulation::kF16 ? 2048.0f : 4096.0f; }

Tensor ones(const Shape& shape, bool grad = false) {
  Tensor t = Tensor::full(shape, 1.0f, DType::f32);
  if (grad) t.set_requires_grad();
  return t;
}

constexpr Accumulation kAll[] = {Accumulation::kF32, Accumulation::kF16, Accumulation::kF16Blocked};

TEST_CASE("accumulation: active only inside an enabled guard, innermost wins", "[accumulate]") {
  CHECK(active_accumulation() == Accumulation::kF32);
  {
    const Autocast outer({.dtype = DType::f16, .accumulation = Accumulation::kF16});
    CHECK(active_accumulation() == Accumulation::kF16);
    {
      const Autocast inner({.dtype = DType::f16, .accumulation = Accumulation::kF16Blocked});
      CHECK(active_accumulation() == Accumulation::kF16Blocked);
    }
    CHECK(active_accumulation() == Accumulation::kF16);
    const Autocast disabled({.dtype = DType::f16, .enabled = false, .accumulation = Accumulation::kF16});
    CHECK(active_accumulation() == Accumulation::kF32);
  }
  CHECK(active_accumulation() == Accumulation::kF32);
}

TEST_CASE("accumulation reaches matmul and matmul_transposed forward and each backward GEMM", "[accumulate]") {
  for (const Accumulation mode : kAll) {
    INFO("mode " << int(mode));
    // Forward: (1, K) x (K, 1), the sum over K.
    Tensor forward;
    // Backward: dA (1,1) = dY (1,K) B^T sums over K; dB (1,1) = A^T dY for A (K,1) sums over K.
    Tensor a_row = ones({1, 1}, true), b_row = ones({1, kLong});
    Tensor a_col = ones({kLong, 1}), b_col = ones({1, 1}, true);
    Tensor bt = ones({kLong, 1});  // matmul_transposed: (1,1) x (K,1)^T, dA sums over K
    Tensor a_t = ones({1, 1}, true);
    Tensor y;
    {
      const Autocast guard({.dtype = DType::f16, .accumulation = mode});
      forward = matmul(ones({1, kLong}), ones({kLong, 1}));
      // Each product's gradient reaches its (1,1) leaf through a sum of 1 or K ones, exact in f16;
      // the adds are elementwise (no accumulation).
      y = add(add(sum(matmul(a_row, b_row)), sum(matmul(a_col, b_col))), sum(matmul_transposed(a_t, bt)));
    }
    CHECK(forward.item() == expected(mode));
    // Backward outside the guard: the closures use the mode captured in forward. Every upstream
    // gradient is ones (sum's backward broadcasts 1).
    backward(y);
    CHECK(a_row.grad().item() == expected(mode));
    CHECK(b_col.grad().item() == expected(mode));
    CHECK(a_t.grad().item() == expected(mode));
  }
}

TEST_CASE("accumulation reaches batched matmul and linear forward, weight and bias gradients", "[accumulate]") {
  for (const Accumulation mode : kAll) {
    INFO("mode " << int(mode));
    Tensor w = ones({1, 1}, true), bias = Tensor::zeros({1}).set_requires_grad();
    Tensor batched, wide, y;
    {
      const Autocast guard({.dtype = DType::f16, .accumulation = mode});
      batched = matmul(ones({2, 1, kLong}), ones({2, kLong, 1}));             // two (1,K) x (K,1)
      wide = linear(ones({1, kLong}), ones({1, kLong}), Tensor::zeros({1}));  // y = x w^T + b, over K
      y = linear(ones({kLong, 1}), w, bias);                                  // (K,1): dW and db sum over the K rows
    }
    CHECK(batched.to_vector() == std::vector<float>{expected(mode), expected(mode)});
    CHECK(wide.item() == expected(mode));
    backward(sum(y));  // dY = ones (sum's backward broadcasts, no accumulation)
    CHECK(w.grad().item() == expected(mode));
    CHECK(bias.grad().item() == expected(mode));
  }
}

TEST_CASE("accumulation reaches attention's head products, the scores and the context", "[accumulate]") {
  for (const Accumulation mode : kAll) {
    INFO("mode " << int(mode));
    const Autocast guard({.dtype = DType::f16, .accumulation = mode});
    // One head of width 4096: the score q k^T sums over the width.
    CHECK(matmul_heads_transposed(ones({1, 1, kLong}), ones({1, 1, kLong}), 1).item() == expected(mode));
    // One query over 4096 keys: the context p v sums over the keys.
    CHECK(matmul_heads(ones({1, 1, 1, kLong}), ones({1, kLong, 1})).item() == expected(mode));
  }
}

TEST_CASE("accumulation reaches sum and mean over all elements, a contiguous and a strided dim", "[accumulate]") {
  for (const Accumulation mode : kAll) {
    INFO("mode " << int(mode));
    const Autocast guard({.dtype = DType::f16, .accumulation = mode});
    const float e = expected(mode);
    CHECK(sum(ones({kLong})).item() == e);
    CHECK(mean(ones({kLong})).item() == e / float(kLong));
    CHECK(sum(ones({3, kLong}), 1).to_vector() == std::vector<float>(3, e));  // rows
    CHECK(sum(ones({kLong, 3}), 0).to_vector() == std::vector<float>(3, e));  // columns
    // f16 inputs are summed the same way (widened exactly).
    CHECK(sum(Tensor::full({kLong}, 1.0f, DType::f16)).item() == e);
    // Sums over nothing are 0, as in f32.
    CHECK(sum(Tensor::zeros({0, 3}), 0).to_vector() == std::vector<float>(3, 0.0f));
    CHECK(sum(Tensor::zeros({3, 0}), 1).to_vector() == std::vector<float>(3, 0.0f));
    CHECK(matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3})).to_vector() == std::vector<float>(6, 0.0f));
  }
}

TEST_CASE("accumulation reaches the statistics of softmax, log_softmax, layer_norm and cross_entropy", "[accumulate]") {
  for (const Accumulation mode : kAll) {
    INFO("mode " << int(mode));
    const Autocast guard({.dtype = DType::f16, .accumulation = mode});
    const float e = expected(mode);  // the sum of 4096 ones
    // A row of zeros: every exponential is exp(0) = 1 exactly, so the sum is e; softmax is 1 / e
    // (masked or not: the same row with a -inf-free mask) and log_softmax -log(e).
    CHECK(softmax(Tensor::zeros({2, kLong})).to_vector() == std::vector<float>(2 * kLong, 1.0f / e));
    const Tensor scores = Tensor::zeros({1, 1, 1, kLong});
    CHECK(scaled_masked_softmax(scores, 0.5f, Indices{}).to_vector() == std::vector<float>(kLong, 1.0f / e));
    CHECK(log_softmax(Tensor::zeros({2, kLong})).to_vector() == std::vector<float>(2 * kLong, -std::log(e)));
    // A row of ones: f32 and blocked give mean 1 and y = 0. The f16 chain gives mean 2048 / 4096
    // = 0.5, so x - mean = 0.5 and the squares 0.25, whose f16 chain stagnates at 512 (512 + 0.25
    // is a tie between 512 and 512.5: even, 512): variance 512 / 4096 = 0.125.
    const float eps = 1e-5f;
    const float ln = mode == Accumulation::kF16 ? 0.5f * (1.0f / std::sqrt(0.125f + eps)) : 0.0f;
    CHECK(layer_norm(ones({2, kLong}), Tensor(), Tensor(), eps).to_vector() == std::vector<float>(2 * kLong, ln));
    // Zero logits over 4096 classes: the loss is log(e), and the total over the (one) row is a
    // chain too: one f16 rounding under kF16 and kF16Blocked (a block of one term).
    const float loss = std::log(e);
    const float rounded = mode == Accumulation::kF32 ? loss : float(half(loss).to_double());
    CHECK(cross_entropy(Tensor::zeros({1, kLong}), Indices({0}, Shape{1})).item() == rounded);
  }
}

// A chain that tells the three modes apart in 64 terms: 1 first, then 63 terms of 2^-11, half an
// ulp of 1 in f16. f32: 1 + 63 2^-11, exact. f16: every step is a tie between 1 and 1 + 2^-10,
// and rounds to 1 (even). f16 blocks of 32: the first block stays at 1, the second sums 32 terms
// exactly to 2^-6, and the f32 carry gives 1 + 2^-6. `weights` holds such a chain in every row
// and column but the first, which hold ones: W[i, j] = 1 if i = 0 or j = 0, else 2^-11.
constexpr int64_t kShort = 64;

float chain(Accumulation mode) {
  switch (mode) {
    case Accumulation::kF32:
      return 1.0f + 63.0f * 0x1p-11f;
    case Accumulation::kF16:
      return 1.0f;
    case Accumulation::kF16Blocked:
      return 1.0f + 0x1p-6f;
  }
  return 0.0f;
}

Tensor weights(const Shape& shape) {
  std::vector<float> w(size_t(kShort * kShort));
  for (int64_t i = 0; i < kShort; ++i) {
    for (int64_t j = 0; j < kShort; ++j) w[size_t(i * kShort + j)] = (i == 0 || j == 0) ? 1.0f : 0x1p-11f;
  }
  return Tensor::from_vector(w, shape);
}

// g: a (kShort, kShort) gradient (any leading dims of 1) whose entry [i, j] sums one row or
// column of W with unit factors, the line picked by g's index `line` (0: i, 1: j): 64 where that
// index is 0 (a line of ones), else RN16 of the mode's chain (the backward products are f16
// under the guard: 1 + 63 2^-11 is a tie in f16 and rounds to 1 + 2^-5).
void check_chains(const Tensor& g, int line, Accumulation mode) {
  const std::vector<float> got = g.to_vector();
  REQUIRE(got.size() == size_t(kShort * kShort));
  const float want = float(half(chain(mode)).to_double());
  int64_t wrong = 0;
  for (int64_t i = 0; i < kShort; ++i) {
    for (int64_t j = 0; j < kShort; ++j) {
      const bool ones_line = (line == 0 ? i : j) == 0;
      wrong += got[size_t(i * kShort + j)] != (ones_line ? float(kShort) : want);
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("accumulation reaches the backward GEMMs of attention's head products", "[accumulate]") {
  for (const Accumulation mode : kAll) {
    INFO("mode " << int(mode));
    // scores = q k^T over one head of width 64 with 64 queries and keys; the upstream gradient
    // is W: dq[t, d] = sum_s W[t, s] (k = 1), dk[s, d] = sum_t W[t, s] (q = 1).
    Tensor q = ones({1, kShort, kShort}, true), k = ones({1, kShort, kShort}, true);
    // context = p v: do = W: dp[t, s] = sum_d W[t, d] (v = 1), dv[s, d] = sum_t W[t, d] (p = 1).
    Tensor p = ones({1, 1, kShort, kShort}, true), v = ones({1, kShort, kShort}, true);
    Tensor y;
    {
      const Autocast guard({.dtype = DType::f16, .accumulation = mode});
      const Tensor scores = matmul_heads_transposed(q, k, 1);  // (1, 1, 64, 64)
      const Tensor context = matmul_heads(p, v);               // (1, 64, 64)
      y = add(sum(mul(scores, weights({1, 1, kShort, kShort}))), sum(mul(context, weights({1, kShort, kShort}))));
    }
    backward(y);
    // dq[t, d] sums row t of W and dk[s, d] column s, the same for every d; dp[t, s] sums row t
    // for every s, dv[s, d] column d for every s.
    check_chains(q.grad(), 0, mode);
    check_chains(k.grad(), 0, mode);
    check_chains(p.grad(), 0, mode);
    check_chains(v.grad(), 1, mode);
  }
}

TEST_CASE("accumulation reaches cross_entropy's label-smoothing sum of log-probabilities", "[accumulate]") {
  for (const Accumulation mode : kAll) {
    INFO("mode " << int(mode));
    // 1024 logits: 0, then -40 (e^-40 = 4e-18 vanishes beside 1 in every mode, so the sum of the
    // exponentials is 1 and log_softmax returns the logits exactly). With label_smoothing 1 the
    // loss is -(1/K) sum_j logp_j: 1023 terms of -40. f32 and f16 blocks of 32 (-1280 each, -1240
    // for the first) sum exactly to -40920; the f16 chain rounds once past 2^15 (ulp 32), and its
    // value is derived here step by step, each step RN16 of the exact sum. Under both f16 modes
    // the total over the (one) row is an f16 chain too: one more rounding of the row's loss.
    std::vector<float> z(1024, -40.0f);
    z[0] = 0.0f;
    float s = 0.0f;
    if (mode == Accumulation::kF16) {
      for (const float x : z) s = float(half(s + x).to_double());
    } else {
      s = -40920.0f;
    }
    const float term = -s / 1024.0f;  // -(1 - 1) logp_0 - (1/1024) s, both exact
    const float want = mode == Accumulation::kF32 ? term : float(half(term).to_double());
    const Autocast guard({.dtype = DType::f16, .accumulation = mode});
    const Tensor logits = Tensor::from_vector(z, {1, 1024});
    CHECK(cross_entropy(logits, Indices({0}, Shape{1}), {.label_smoothing = 1.0f}).item() == want);
  }
}

}  // namespace
}  // namespace hg
