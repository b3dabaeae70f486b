// multi_head_attention and its products in place (matmul_heads_transposed, matmul_heads) against
// the formulation they replace: q, k, v (B, T, H*D) permuted to (B, H, T, D), attended with
// scaled_dot_product_attention (matmul_transposed, softmax, matmul), permuted back. Every output
// and gradient element is the same GEMM chain over the same k in both, so they must agree bit for
// bit, in f32 and under each autocast mode, on shapes that are not multiples of the GEMM's tiles
// (6 or 12 rows by 16 or 32 columns), with masks, dropout and threads.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"

// A namespace of its own: the test files compile together in the unity build.
namespace hg::attention_heads_test {

struct Case {
  int64_t b, t, heads, d;
};

// The output and the q, k, v gradients of one formulation, as bit patterns.
struct Run {
  std::vector<uint32_t> y, dq, dk, dv;
};

std::vector<uint32_t> bits_of(const Tensor& x) {
  const std::vector<float> v = x.to_vector();
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// q, k, v drawn from `seed` in `dtype` (the model's dtype: f16 under O2), loss sum(y * w) for a
// random w, so every gradient element differs.
Run run(bool in_place, const Case& c, DType dtype, const Indices& mask, bool causal, float dropout_p) {
  const int64_t cols = c.heads * c.d;
  Generator data(17);
  Tensor q = Tensor::randn({c.b, c.t, cols}, data, dtype), k = Tensor::randn({c.b, c.t, cols}, data, dtype),
         v = Tensor::randn({c.b, c.t, cols}, data, dtype);
  const Tensor w = Tensor::randn({c.b, c.t, cols}, data);
  for (Tensor* x : {&q, &k, &v}) x->set_requires_grad(true);
  Generator drop(5);
  Tensor y;
  if (in_place) {
    y = multi_head_attention(q, k, v, c.heads, mask, causal, dropout_p, &drop);
  } else {
    const auto split = [&](const Tensor& x) { return permute(reshape(x, {c.b, c.t, c.heads, c.d}), {0, 2, 1, 3}); };
    const Tensor attended = scaled_dot_product_attention(split(q), split(k), split(v), mask, causal, dropout_p, &drop);
    y = reshape(permute(attended, {0, 2, 1, 3}), {c.b, c.t, cols});
  }
  backward(sum(mul(y, w)));
  return {bits_of(y), bits_of(q.grad()), bits_of(k.grad()), bits_of(v.grad())};
}

// Padding in every row but the last (which has none): at the end, and one key in the middle.
Indices padding_mask(int64_t b, int64_t t) {
  std::vector<int32_t> values(size_t(b * t), 1);
  for (int64_t i = 0; i + 1 < b; ++i) {
    for (int64_t j = t - 1 - i; j < t; ++j) values[size_t(i * t + j)] = 0;
    values[size_t(i * t + t / 2)] = 0;
  }
  return Indices(std::move(values), {b, t});
}

void check_same(const Case& c, DType dtype, const std::string& mode, bool masked, bool causal, float dropout_p = 0.0f) {
  const Indices mask = masked ? padding_mask(c.b, c.t) : Indices();
  INFO("B " << c.b << " T " << c.t << " H " << c.heads << " D " << c.d << ", " << mode << ", mask " << masked
            << ", causal " << causal << ", dropout " << dropout_p);
  const Run old_way = run(false, c, dtype, mask, causal, dropout_p),
            in_place = run(true, c, dtype, mask, causal, dropout_p);
  CHECK(in_place.y == old_way.y);
  CHECK(in_place.dq == old_way.dq);
  CHECK(in_place.dk == old_way.dk);
  CHECK(in_place.dv == old_way.dv);
}

const Case kCases[] = {{2, 13, 1, 8}, {3, 7, 3, 24}, {2, 13, 3, 8}, {1, 1, 3, 8}};

TEST_CASE("attention in place equals permute + batched matmul bit for bit: f32", "[attention_heads]") {
  for (const Case& c : kCases) {
    for (bool masked : {false, true}) {
      for (bool causal : {false, true}) check_same(c, DType::f32, "f32", masked, causal);
    }
  }
  check_same(kCases[1], DType::f32, "f32", true, false, 0.25f);  // dropout: the same mask from the same generator
}

TEST_CASE("attention in place equals permute + batched matmul bit for bit: autocast modes", "[attention_heads]") {
  struct Mode {
    std::string name;
    DType model, compute;
    NormalizationOutputs normalizations;
    Accumulation accumulation;
  };
  const Mode modes[] = {
      {"fp16 O2", DType::f16, DType::f16, NormalizationOutputs::kInputDtype, Accumulation::kF32},
      {"fp16 O1", DType::f32, DType::f16, NormalizationOutputs::kFloat32, Accumulation::kF32},
      {"bf16", DType::f32, DType::bf16, NormalizationOutputs::kFloat32, Accumulation::kF32},
      {"fp16 O2, f16 accumulation", DType::f16, DType::f16, NormalizationOutputs::kInputDtype,
       Accumulation::kF16Blocked},
  };
  for (const Mode& m : modes) {
    const Autocast guard({.dtype = m.compute, .normalizations = m.normalizations, .accumulation = m.accumulation});
    for (const Case& c : kCases) {
      check_same(c, m.model, m.name, true, false);
      check_same(c, m.model, m.name, true, true);
    }
  }
}

TEST_CASE("attention in place equals permute + batched matmul bit for bit: 1 and 2 threads",
          "[attention_heads][parallel]") {
  // 2 * 64 * 64 * 32 * 16 = 4.2 MFLOP per product, above kParallelFlops (2^22): B = 8 rows of the
  // grid shared out over the team; B = 3 (odd) threads inside each batched gemm call instead.
  const int saved = omp_get_max_threads();
  for (const Case& c : {Case{8, 64, 2, 32}, Case{3, 64, 2, 32}}) {
    omp_set_num_threads(1);
    const Run one = run(true, c, DType::f32, padding_mask(c.b, c.t), false, 0.0f);
    omp_set_num_threads(2);
    const Run two = run(true, c, DType::f32, padding_mask(c.b, c.t), false, 0.0f);
    omp_set_num_threads(saved);
    INFO("B " << c.b);
    CHECK(one.y == two.y);
    CHECK(one.dq == two.dq);
    CHECK(one.dk == two.dk);
    CHECK(one.dv == two.dv);
  }
}

TEST_CASE("head products: shapes, Tq != Tk, and errors naming the op", "[attention_heads]") {
  Generator gen(3);
  const Tensor q = Tensor::randn({2, 5, 6}, gen), k = Tensor::randn({2, 7, 6}, gen);
  const Tensor scores = matmul_heads_transposed(q, k, 3);
  REQUIRE(scores.shape() == Shape{2, 3, 5, 7});
  // Element (b, h, i, j) = sum over d of q[b, i, h*2 + d] k[b, j, h*2 + d], the same chain as the
  // (B, H, T, D) product.
  const auto split = [](const Tensor& x, int64_t t) { return permute(reshape(x, {2, t, 3, 2}), {0, 2, 1, 3}); };
  CHECK(bits_of(scores) == bits_of(matmul_transposed(split(q, 5), split(k, 7))));
  const Tensor v = Tensor::randn({2, 7, 6}, gen);
  const Tensor context = matmul_heads(scores, v);
  REQUIRE(context.shape() == Shape{2, 5, 6});
  CHECK(bits_of(context) == bits_of(reshape(permute(matmul(scores, split(v, 7)), {0, 2, 1, 3}), {2, 5, 6})));
  CHECK_THROWS_WITH(matmul_heads_transposed(q, k, 4),
                    Catch::Contains("matmul_heads_transposed") && Catch::Contains("4 heads"));
  CHECK_THROWS_WITH(matmul_heads(scores, q), Catch::Contains("matmul_heads: p must be"));
  CHECK_THROWS_WITH(multi_head_attention(q, q, q, 4), Catch::Contains("attention: 4 heads"));
  CHECK_THROWS_WITH(multi_head_attention(q, q, q, 3, Indices({1, 1}, {1, 2})), Catch::Contains("mask of shape"));
}

TEST_CASE("head products with key_lengths: the leading keys' bits, zeros after them, and their gradients",
          "[attention_heads]") {
  // Batch element 0 keeps 4 of 7 keys, element 1 all 7. The scores' columns past a length are 0,
  // the others the unbounded product's bits; the context reads p's first keys only, which the
  // unbounded product over p with those columns zeroed equals bit for bit; dk and dv rows past
  // a length are 0, and dp's columns there too.
  Generator gen(4);
  const std::vector<int64_t> lengths = {4, 7};
  Tensor q = Tensor::randn({2, 5, 6}, gen).set_requires_grad(), k = Tensor::randn({2, 7, 6}, gen).set_requires_grad();
  const Tensor full = matmul_heads_transposed(q, k, 3), bounded = matmul_heads_transposed(q, k, 3, lengths);
  const std::vector<float> f = full.to_vector(), g = bounded.to_vector();
  std::vector<float> zeroed = f;
  for (size_t i = 0; i < f.size(); ++i) {
    const int64_t b = int64_t(i) / (3 * 5 * 7), j = int64_t(i) % 7;
    if (j >= lengths[size_t(b)]) zeroed[i] = 0.0f;
  }
  CHECK(g == zeroed);
  const Tensor w = Tensor::randn({2, 3, 5, 7}, gen);
  backward(sum(mul(bounded, w)));
  const std::vector<float> dk = k.grad().to_vector();
  for (int64_t j = 4; j < 7; ++j) {
    for (int64_t c = 0; c < 6; ++c) CHECK(dk[size_t(j * 6 + c)] == 0.0f);  // element 0's keys 4..6
  }
  CHECK(dk[size_t(7 * 6 + 6 * 6)] != 0.0f);  // element 1's last key is real

  Tensor p = Tensor::from_vector(zeroed, {2, 3, 5, 7}).set_requires_grad(),
         v = Tensor::randn({2, 7, 6}, gen).set_requires_grad();
  const Tensor context = matmul_heads(p, v, lengths);
  CHECK(bits_of(context) == bits_of(matmul_heads(p.detach(), v.detach())));
  backward(sum(mul(context, Tensor::randn({2, 5, 6}, gen))));
  const std::vector<float> dp = p.grad().to_vector(), dv = v.grad().to_vector();
  for (size_t i = 0; i < dp.size(); ++i) {
    if (i < 3 * 5 * 7 && int64_t(i) % 7 >= 4) CHECK(dp[i] == 0.0f);
  }
  for (int64_t j = 4; j < 7; ++j) CHECK(dv[size_t(j * 6)] == 0.0f);
  CHECK_THROWS_WITH(matmul_heads(p, v, {4}), Catch::Contains("matmul_heads: 1 key lengths for a batch of 2"));
  CHECK_THROWS_WITH(matmul_heads_transposed(q, k, 3, {4, -1}), Catch::Contains("key length -1 < 0"));
}

}  // namespace hg::attention_heads_test
