// The accumulation of an Autocast guard reaches every GEMM and sum, in forward and in backward
// (captured when the op ran, so a backward outside the guard still uses it). Each check sums 4096
// ones, whose f16 chain stagnates at 2048 (2048 + 1 is a tie between 2048 and 2050: even,
// 2048), while f32 and f16 blocks of 32 with an f32 carry (each block exactly 32) give 4096: a
// path the mode did not reach gives 4096 instead of 2048. The kernels' bits are tested against
// an oracle in tests/autograd/kernels/test_accumulate.cpp.
#include <catch2/catch.hpp>

#include <cmath>

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
      batched = matmul(ones({2, 1, kLong}), ones({2, kLong, 1}));  // two (1,K) x (K,1)
      wide = linear(ones({1, kLong}), ones({1, kLong}), Tensor::zeros({1}));  // y = x w^T + b, over K
      y = linear(ones({kLong, 1}), w, bias);  // (K,1): dW and db sum over the K rows
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

}  // namespace
}  // namespace hg
