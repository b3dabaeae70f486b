// Zero-element tensors are valid tensors (and valid safetensors): every op takes them, in every
// dtype, forward and backward, with the shapes and values torch gives:
//   sum over nothing = 0, mean over nothing = NaN (0/0), a product over an empty inner
//   dimension = zeros, and gradients of empty inputs are empty.
// The sanitized tree runs these too: an n = 0 copy from or to a null pointer is undefined
// behaviour that UBSan reports (the fuzzer found one in widen, issue #14).
#include <catch2/catch.hpp>
#include <cmath>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/autograd/tensor.h"

namespace hg {

namespace {

Tensor leaf(const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype).set_requires_grad(); }

// Backward from `y` with a seed of ones (any shape, including empty ones).
void backward_ones(const Tensor& y) { backward(y, Tensor::ones(y.shape(), y.dtype())); }

}  // namespace

TEST_CASE("empty tensors: creation, copies and casts", "[empty]") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor t = Tensor::from_vector({}, {0, 4}, dtype);
    CHECK(t.numel() == 0);
    CHECK(t.to_vector().empty());
    CHECK(t.clone().shape() == Shape{0, 4});
    for (DType target : {DType::f32, DType::f16, DType::bf16}) {
      const Tensor c = t.to(target);
      CHECK(c.shape() == Shape{0, 4});
      CHECK(c.dtype() == target);
    }
    CHECK(Tensor::zeros({3, 0}, dtype).to_vector().empty());
    CHECK(Tensor::full({0}, 2.0f, dtype).numel() == 0);
  }
}

TEST_CASE("empty tensors: elementwise ops forward and backward", "[empty]") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor a = leaf({0, 3}, dtype), b = leaf({3}, dtype);
    const Tensor y = add(mul(gelu(a), b), sub(exp(a), div(a, add_scalar(b, 1.0f))));
    CHECK(y.shape() == Shape{0, 3});
    backward_ones(y);
    REQUIRE(a.grad().defined());
    CHECK(a.grad().shape() == Shape{0, 3});
    // b is broadcast over zero rows: its gradient is a sum over nothing, exactly zero.
    REQUIRE(b.grad().defined());
    CHECK(b.grad().to_vector() == std::vector<float>{0.0f, 0.0f, 0.0f});
  }
}

TEST_CASE("empty tensors: reductions give torch's values", "[empty]") {
  const Tensor x = leaf({0, 3}, DType::f32);
  CHECK(sum(x).item() == 0.0f);
  CHECK(std::isnan(mean(x).item()));  // 0 / 0, as torch.mean of an empty tensor
  const Tensor rows = sum(x, 0);
  CHECK(rows.to_vector() == std::vector<float>{0.0f, 0.0f, 0.0f});
  CHECK(sum(x, 1).shape() == Shape{0});
  for (float v : mean(x, 0).to_vector()) CHECK(std::isnan(v));  // torch.mean(x, 0): nan per column
  backward(sum(x));
  CHECK(x.grad().shape() == Shape{0, 3});
}

TEST_CASE("empty tensors: matrix products with an empty outer or inner dimension", "[empty]") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor a = leaf({0, 4}, dtype), w = leaf({3, 4}, dtype), bias = leaf({3}, dtype);
    const Tensor y = linear(a, w, bias);
    CHECK(y.shape() == Shape{0, 3});
    backward_ones(y);
    CHECK(a.grad().shape() == Shape{0, 4});
    CHECK(w.grad().to_vector() == std::vector<float>(12, 0.0f));
    CHECK(bias.grad().to_vector() == std::vector<float>(3, 0.0f));

    // K = 0: the product of (2, 0) and (0, 3) is a (2, 3) sum over nothing, zeros.
    const Tensor p = leaf({2, 0}, dtype), q = leaf({0, 3}, dtype);
    const Tensor z = matmul(p, q);
    CHECK(z.to_vector() == std::vector<float>(6, 0.0f));
    backward_ones(z);
    CHECK(p.grad().shape() == Shape{2, 0});
    CHECK(q.grad().shape() == Shape{0, 3});
  }
}

TEST_CASE("empty tensors: attention on heads in place with no batch, no tokens or no columns", "[empty]") {
  for (const Shape& shape : {Shape{0, 4, 6}, Shape{2, 0, 6}, Shape{2, 3, 0}}) {
    const Tensor q = leaf(shape, DType::f16), k = leaf(shape, DType::f16), v = leaf(shape, DType::f16);
    const Tensor y = multi_head_attention(q, k, v, 2);
    CHECK(y.shape() == shape);
    backward_ones(y);
    CHECK(q.grad().shape() == shape);
    CHECK(k.grad().shape() == shape);
    CHECK(v.grad().shape() == shape);
  }
}

TEST_CASE("empty tensors: row ops, shape ops and embedding", "[empty]") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor x = leaf({0, 5}, dtype), g = leaf({5}, dtype), b = leaf({5}, dtype);
    const Tensor y = add(softmax(x), layer_norm(log_softmax(x), g, b));
    CHECK(y.shape() == Shape{0, 5});
    const Tensor t = permute(reshape(y, {0, 5, 1}), {1, 0, 2});
    CHECK(t.shape() == Shape{5, 0, 1});
    const Tensor c = cat({transpose(x), transpose(y)}, 1);
    CHECK(c.shape() == Shape{5, 0});
    CHECK(narrow(x, 1, 1, 3).shape() == Shape{0, 3});
    backward_ones(add(sum(c), sum(t)));
    CHECK(x.grad().shape() == Shape{0, 5});
    CHECK(g.grad().to_vector() == std::vector<float>(5, 0.0f));

    const Tensor table = leaf({4, 3}, dtype);
    const Indices none({}, {0, 2});
    const Tensor e = embedding(none, table);
    CHECK(e.shape() == Shape{0, 2, 3});
    backward_ones(e);
    CHECK(table.grad().to_vector() == std::vector<float>(12, 0.0f));
  }
}

}  // namespace hg
