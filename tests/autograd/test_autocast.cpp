// Autocast: each policy category picks the documented dtype, weight casts are cached once per
// region, and gradients of f32 weights come back in f32 (O1).
#include <catch2/catch.hpp>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"

namespace hg {

TEST_CASE("autocast picks the dtype of each op category", "[autocast]") {
  Generator gen(1);
  const Tensor x = Tensor::randn({4, 8}, gen), w = Tensor::randn({3, 8}, gen);
  const Tensor h = Tensor::randn({4, 8}, gen, DType::f16);
  for (DType low : {DType::f16, DType::bf16}) {
    Autocast ac({.dtype = low});
    CHECK(matmul(x, transpose(w)).dtype() == low);  // lower precision
    CHECK(linear(x, w).dtype() == low);
    CHECK(softmax(h).dtype() == DType::f32);  // f32 ops
    CHECK(log_softmax(h).dtype() == DType::f32);
    CHECK(layer_norm(h, {}, {}).dtype() == DType::f32);
    CHECK(sum(h).dtype() == DType::f32);
    CHECK(exp(h).dtype() == DType::f32);
    CHECK(cross_entropy(h, Indices({0, 1, 2, 3}, {4})).dtype() == DType::f32);
    CHECK(add(h, h).dtype() == DType::f16);  // promote: widest input
    CHECK(add(h, x).dtype() == DType::f32);
  }
  // Outside autocast ops keep their inputs' dtype.
  CHECK(matmul(x, transpose(w)).dtype() == DType::f32);
  CHECK(softmax(h).dtype() == DType::f16);
  CHECK(relu(h).dtype() == DType::f16);
}

TEST_CASE("normalizations can keep their input's dtype: the f32 result rounded once", "[autocast]") {
  Generator gen(3);
  const Tensor h = mul_scalar(Tensor::randn({6, 40}, gen, DType::f16), 3.0f);
  const Tensor w = Tensor::randn({40}, gen, DType::f16), b = Tensor::randn({40}, gen, DType::f16);
  for (DType low : {DType::f16, DType::bf16}) {
    const Tensor x = cast(h, low);
    const Tensor wl = cast(w, low), bl = cast(b, low);
    Tensor softmax32, log_softmax32, layer_norm32;
    {
      Autocast torch_like({.dtype = low});
      softmax32 = softmax(x);
      log_softmax32 = log_softmax(x);
      layer_norm32 = layer_norm(x, wl, bl);
    }
    Autocast o2({.dtype = low, .normalizations = NormalizationOutputs::kInputDtype});
    const Tensor s = softmax(x), ls = log_softmax(x), ln = layer_norm(x, wl, bl);
    CHECK(s.dtype() == low);
    CHECK(ls.dtype() == low);
    CHECK(ln.dtype() == low);
    // The kernels compute in f32 either way, so storing in `low` is exactly one rounding of the
    // f32 output (round to nearest even, as cast does), bit for bit.
    CHECK(s.to_vector() == cast(softmax32, low).to_vector());
    CHECK(ls.to_vector() == cast(log_softmax32, low).to_vector());
    CHECK(ln.to_vector() == cast(layer_norm32, low).to_vector());
    // The rest of the f32 list is unchanged: sums and exp can leave f16's range.
    CHECK(sum(x).dtype() == DType::f32);
    CHECK(exp(x).dtype() == DType::f32);
    CHECK(cross_entropy(x, Indices({0, 1, 2, 3, 4, 5}, {6})).dtype() == DType::f32);
    CHECK(matmul(x, transpose(x)).dtype() == low);
    // An f32 input stays f32 (the widest input, as kPromote).
    CHECK(softmax(cast(x, DType::f32)).dtype() == DType::f32);
  }
}

TEST_CASE("a weight is cast once per autocast region and its gradient is f32", "[autocast]") {
  Generator gen(2);
  Tensor w = Tensor::randn({3, 8}, gen).set_requires_grad();
  const Tensor x = Tensor::randn({4, 8}, gen);
  Tensor loss;
  int64_t casts = 0;
  {
    Autocast ac({.dtype = DType::f16});
    loss = sum(add(linear(x, w), linear(x, w)));
    for (int64_t i = 0; i < active_tape().size(); ++i) {
      const Node& node = active_tape().node(i);
      casts += std::string(node.op) == "cast" && node.inputs[0].same(w);
    }
  }
  CHECK(casts == 1);  // cached across both linears
  backward(loss);
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::f32);
}

}  // namespace hg
