// Finite-difference gradient checks for every op in f32 (gradcheck.h states the tolerance),
// with broadcasting, odd sizes (1, 7, 17) for kernel tails, masks, ignore_index and tensors
// used twice. Points are drawn away from kinks (relu at 0, max ties).
#include "tests/autograd/gradcheck.h"

namespace hg {
using testing::gradcheck;
using testing::random_tensor;
using V = std::vector<Tensor>;

TEST_CASE("gradcheck: binary ops with broadcasting", "[grad]") {
  gradcheck([](const V& x) { return add(x[0], x[1]); }, {random_tensor({3, 7}, 1), random_tensor({7}, 2)});
  gradcheck([](const V& x) { return sub(x[0], x[1]); }, {random_tensor({3, 1}, 3), random_tensor({3, 7}, 4)});
  gradcheck([](const V& x) { return mul(x[0], x[1]); }, {random_tensor({2, 3, 7}, 5), random_tensor({3, 1}, 6)});
  gradcheck([](const V& x) { return div(x[0], x[1]); }, {random_tensor({17}, 7), random_tensor({17}, 8, 0.5f, 2.0f)});
  gradcheck([](const V& x) { return div(x[0], x[1]); }, {random_tensor({4, 5}, 7), random_tensor({1}, 8, 0.5f, 2.0f)});
}

TEST_CASE("gradcheck: a tensor used twice accumulates both contributions", "[grad]") {
  gradcheck([](const V& x) { return mul(x[0], x[0]); }, {random_tensor({7}, 9)});
  gradcheck([](const V& x) { return add(mul(x[0], x[1]), tanh(x[0])); },
            {random_tensor({3, 5}, 10), random_tensor({5}, 11)});
}

TEST_CASE("gradcheck: unary ops", "[grad]") {
  gradcheck([](const V& x) { return neg(x[0]); }, {random_tensor({7}, 12)});
  gradcheck([](const V& x) { return add_scalar(mul_scalar(x[0], 3.0f), 2.0f); }, {random_tensor({7}, 13)});
  gradcheck([](const V& x) { return pow_scalar(x[0], 3.0f); }, {random_tensor({7}, 14)});
  gradcheck([](const V& x) { return pow_scalar(x[0], -1.5f); }, {random_tensor({7}, 15, 0.5f, 2.0f)});
  gradcheck([](const V& x) { return exp(x[0]); }, {random_tensor({17}, 16)});
  gradcheck([](const V& x) { return log(x[0]); }, {random_tensor({17}, 17, 0.5f, 3.0f)});
  gradcheck([](const V& x) { return sqrt(x[0]); }, {random_tensor({17}, 18, 0.5f, 3.0f)});
  gradcheck([](const V& x) { return tanh(x[0]); }, {random_tensor({17}, 19, -2.0f, 2.0f)});
  gradcheck([](const V& x) { return gelu(x[0]); }, {random_tensor({17}, 20, -3.0f, 3.0f)});
  gradcheck([](const V& x) { return gelu(x[0], GeluApproximation::kTanh); }, {random_tensor({17}, 21, -3.0f, 3.0f)});
  // relu away from its kink: |x| >= 0.1 > h.
  Tensor x = Tensor::from_vector({-2.0f, -0.5f, -0.1f, 0.1f, 0.7f, 3.0f, 1.5f}, {7});
  gradcheck([](const V& v) { return relu(v[0]); }, {x});
}

TEST_CASE("gradcheck: reductions", "[grad]") {
  gradcheck([](const V& x) { return sum(x[0]); }, {random_tensor({3, 7}, 22)});
  gradcheck([](const V& x) { return sum(x[0], 1, false); }, {random_tensor({2, 3, 7}, 23)});
  gradcheck([](const V& x) { return sum(x[0], -1, true); }, {random_tensor({3, 7}, 24)});
  gradcheck([](const V& x) { return mean(x[0]); }, {random_tensor({17}, 25)});
  gradcheck([](const V& x) { return mean(x[0], 0, true); }, {random_tensor({5, 3}, 26)});
  // max on distinct values (no ties within h)
  gradcheck([](const V& x) { return max(x[0], 1).values; }, {Tensor::from_vector({1, 5, 3, 9, 2, 4}, {2, 3})});
  gradcheck([](const V& x) { return sum_to(x[0], {3}); }, {random_tensor({4, 3}, 27)});
}

TEST_CASE("gradcheck: matmul and linear", "[grad]") {
  gradcheck([](const V& x) { return matmul(x[0], x[1]); }, {random_tensor({3, 7}, 28), random_tensor({7, 5}, 29)});
  gradcheck([](const V& x) { return matmul(x[0], x[1]); },
            {random_tensor({2, 3, 4}, 30), random_tensor({2, 4, 5}, 31)});
  gradcheck([](const V& x) { return matmul(x[0], x[1]); },
            {random_tensor({2, 2, 3, 4}, 32), random_tensor({2, 2, 4, 1}, 33)});
  gradcheck([](const V& x) { return matmul(x[0], x[1]); }, {random_tensor({2, 3, 4}, 34), random_tensor({4, 5}, 35)});
  gradcheck([](const V& x) { return matmul_transposed(x[0], x[1]); },
            {random_tensor({2, 3, 4}, 64), random_tensor({2, 5, 4}, 65)});
  gradcheck([](const V& x) { return matmul_transposed(x[0], x[1]); },
            {random_tensor({2, 3, 4}, 66), random_tensor({5, 4}, 67)});
  gradcheck([](const V& x) { return linear(x[0], x[1], x[2]); },
            {random_tensor({2, 3, 7}, 36), random_tensor({5, 7}, 37), random_tensor({5}, 38)});
  gradcheck([](const V& x) { return linear(x[0], x[1]); }, {random_tensor({1, 7}, 39), random_tensor({17, 7}, 40)});
}

TEST_CASE("gradcheck: layout ops", "[grad]") {
  gradcheck([](const V& x) { return transpose(x[0]); }, {random_tensor({2, 3, 5}, 41)});
  gradcheck([](const V& x) { return permute(x[0], {2, 0, 3, 1}); }, {random_tensor({2, 3, 4, 5}, 42)});
  gradcheck([](const V& x) { return reshape(x[0], {5, 3}); }, {random_tensor({3, 5}, 43)});
  gradcheck(
      [](const V& x) {
        return cat({x[0], x[1], x[0]}, 1);
      },
      {random_tensor({2, 3}, 44), random_tensor({2, 1}, 45)});
  gradcheck([](const V& x) { return narrow(x[0], 1, 1, 2); }, {random_tensor({3, 4, 2}, 46)});
  gradcheck(
      [](const V& x) {
        return masked_fill(x[0], Indices({1, 0, 0, 1, 0, 1, 0, 0}, {2, 4}), -5.0f);
      },
      {random_tensor({3, 2, 4}, 47)});
}

TEST_CASE("gradcheck: softmax, log_softmax, layer_norm", "[grad]") {
  gradcheck([](const V& x) { return softmax(x[0]); }, {random_tensor({3, 7}, 48, -2.0f, 2.0f)});
  gradcheck([](const V& x) { return log_softmax(x[0]); }, {random_tensor({3, 17}, 49, -2.0f, 2.0f)});
  gradcheck([](const V& x) { return layer_norm(x[0], x[1], x[2]); },
            {random_tensor({4, 7}, 50, -2.0f, 2.0f), random_tensor({7}, 51), random_tensor({7}, 52)});
  gradcheck([](const V& x) { return layer_norm(x[0], Tensor(), Tensor(), 1e-3f); }, {random_tensor({2, 3, 17}, 53)});
}

TEST_CASE("gradcheck: embedding, dropout, cross_entropy", "[grad]") {
  const Indices ids({3, 1, 3, 0, 2, 3}, {2, 3});
  gradcheck([&](const V& x) { return embedding(ids, x[0]); }, {random_tensor({4, 5}, 54)});
  // padding_idx: the row is still looked up, but (as in torch) receives no gradient.
  Tensor w = random_tensor({4, 5}, 55).set_requires_grad();
  backward(sum(embedding(ids, w, /*padding_idx=*/3)));
  const std::vector<float> g = w.grad().to_vector();
  CHECK(std::vector<float>(g.begin() + 15, g.end()) == std::vector<float>(5, 0.0f));
  CHECK(std::vector<float>(g.begin(), g.begin() + 5) == std::vector<float>(5, 1.0f));  // id 0 once
  gradcheck(
      [](const V& x) {
        Generator gen(7);  // the same mask for every evaluation
        return dropout(x[0], 0.3f, gen);
      },
      {random_tensor({17}, 56)});
  const Indices targets({2, 0, -100, 4}, {4});
  gradcheck([&](const V& x) { return cross_entropy(x[0], targets); }, {random_tensor({4, 5}, 57, -2.0f, 2.0f)});
  gradcheck([&](const V& x) { return cross_entropy(x[0], targets, {.label_smoothing = 0.1f}); },
            {random_tensor({4, 5}, 58, -2.0f, 2.0f)});
}

TEST_CASE("gradcheck: attention with masks, masked mean", "[grad]") {
  const Indices mask({1, 1, 1, 0, 1, 1, 0, 0}, {2, 4});  // (B, T): 1 = real token
  for (bool causal : {false, true}) {
    gradcheck([&](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], mask, causal); },
              {random_tensor({2, 2, 4, 3}, 59), random_tensor({2, 2, 4, 3}, 60), random_tensor({2, 2, 4, 3}, 61)});
    // The heads read in place from (B, T, H*D): 2 heads of 3.
    gradcheck([&](const V& x) { return multi_head_attention(x[0], x[1], x[2], 2, mask, causal); },
              {random_tensor({2, 4, 6}, 68), random_tensor({2, 4, 6}, 69), random_tensor({2, 4, 6}, 70)});
  }
  gradcheck([&](const V& x) { return masked_mean(x[0], mask); }, {random_tensor({2, 4, 3}, 62)});
}

TEST_CASE("gradcheck: cast f32 -> f32 and the gradient dtype of a cast", "[grad]") {
  Tensor w = random_tensor({3, 4}, 63);
  w.set_requires_grad(true);
  Tensor y = sum(cast(w, DType::f16));
  backward(y);
  // The cast's backward returns the gradient in the source dtype (autocast O1 semantics).
  REQUIRE(w.grad().dtype() == DType::f32);
  for (float g : w.grad().to_vector()) CHECK(g == 1.0f);
}

}  // namespace hg
