// The emulation model, op by op: an op on f16/bf16 tensors equals the same op on the widened
// f32 values, rounded once to the narrow dtype (bit for bit: both compute the identical f32
// value, so any extra intermediate rounding would show as a mismatch). Also: the rounding
// scope is honoured, and results do not depend on the thread count.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "halfgrad/autograd/kernels/gemm_bf16dot.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/rounding_scope.h"
#include "halfgrad/autograd/tape.h"

namespace hg {
namespace {

std::string hex_mismatch(const Tensor& got, const Tensor& want) {
  const auto g = got.u16(), w = want.u16();
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] != w[i]) {
      char buffer[80];
      std::snprintf(buffer, sizeof buffer, "element %zu: got 0x%04x, want 0x%04x", i, g[i], w[i]);
      return buffer;
    }
  }
  return "";
}

void check_rounded_once(const std::function<Tensor(const std::vector<Tensor>&)>& op, const std::vector<Shape>& shapes,
                        float low = -2.0f, float high = 2.0f) {
  for (DType narrow : {DType::f16, DType::bf16}) {
    Generator gen(99);
    std::vector<Tensor> narrow_inputs, wide_inputs;
    for (const Shape& s : shapes) {
      narrow_inputs.push_back(Tensor::uniform(s, gen, low, high, narrow));
      wide_inputs.push_back(narrow_inputs.back().to(DType::f32));
    }
    const Tensor got = op(narrow_inputs);
    REQUIRE(got.dtype() == narrow);
    const Tensor want = op(wide_inputs).to(narrow);
    INFO(dtype_name(narrow) << " " << hex_mismatch(got, want));
    CHECK(hex_mismatch(got, want).empty());
  }
}

using V = std::vector<Tensor>;

}  // namespace

TEST_CASE("f16/bf16 elementwise ops equal the f32 op rounded once", "[dtype]") {
  check_rounded_once([](const V& x) { return add(x[0], x[1]); }, {{17, 67}, {67}});
  check_rounded_once([](const V& x) { return sub(x[0], x[1]); }, {{17, 67}, {17, 1}});
  check_rounded_once([](const V& x) { return mul(x[0], x[1]); }, {{1000}, {1000}});
  check_rounded_once([](const V& x) { return div(x[0], x[1]); }, {{1000}, {1000}});
  check_rounded_once([](const V& x) { return neg(x[0]); }, {{7}});
  check_rounded_once([](const V& x) { return add_scalar(x[0], 0.1f); }, {{1000}});
  check_rounded_once([](const V& x) { return mul_scalar(x[0], 0.1f); }, {{1000}});
  check_rounded_once([](const V& x) { return pow_scalar(x[0], 1.5f); }, {{1000}}, 0.1f, 4.0f);
  check_rounded_once([](const V& x) { return exp(x[0]); }, {{1000}});
  check_rounded_once([](const V& x) { return log(x[0]); }, {{1000}}, 0.01f, 100.0f);
  check_rounded_once([](const V& x) { return sqrt(x[0]); }, {{1000}}, 0.0f, 100.0f);
  check_rounded_once([](const V& x) { return tanh(x[0]); }, {{1000}});
  check_rounded_once([](const V& x) { return relu(x[0]); }, {{1000}});
  check_rounded_once([](const V& x) { return gelu(x[0]); }, {{1000}}, -5.0f, 5.0f);
  check_rounded_once([](const V& x) { return gelu(x[0], GeluApproximation::kTanh); }, {{1000}}, -5.0f, 5.0f);
}

// Broadcasting against explicit indexing: an output of 5,550 elements (chunks of 2,048 end inside
// rows and inside the middle dim), the broadcast input on either side, in every dtype.
TEST_CASE("broadcast operands equal explicit indexing across chunks, in every dtype", "[dtype]") {
  const Shape out_shape{3, 50, 37};
  const std::vector<Shape> shapes = {{50, 1}, {3, 1, 37}, {37}, {1}, {3, 50, 1}, {1, 50, 37}, {3, 1, 1}};
  for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (const Shape& shape : shapes) {
      INFO(dtype_name(dtype) << ", operand of shape " << shape);
      Generator gen(5);
      const Tensor x = Tensor::uniform(out_shape, gen, -2.0f, 2.0f, dtype);
      const Tensor b = Tensor::uniform(shape, gen, -2.0f, 2.0f, dtype);
      const std::vector<float> xv = x.to_vector(), bv = b.to_vector();
      std::vector<float> x_times_b(xv.size()), b_minus_x(xv.size());
      for (int64_t i = 0; i < out_shape.numel(); ++i) {
        const int64_t index[3] = {i / (50 * 37), i / 37 % 50, i % 37};
        int64_t at = 0;  // b's element: its dims aligned right, size-1 dims read at 0
        for (int d = 0; d < shape.ndim(); ++d) {
          const int64_t dim = shape[d];
          at = at * dim + (dim == 1 ? 0 : index[3 - shape.ndim() + d]);
        }
        x_times_b[size_t(i)] = xv[size_t(i)] * bv[size_t(at)];
        b_minus_x[size_t(i)] = bv[size_t(at)] - xv[size_t(i)];
      }
      // The f32 results rounded once (nearest even), as the ops round them.
      CHECK(mul(x, b).to_vector() == Tensor::from_vector(x_times_b, out_shape, dtype).to_vector());
      CHECK(sub(b, x).to_vector() == Tensor::from_vector(b_minus_x, out_shape, dtype).to_vector());
    }
  }
}

TEST_CASE("f16/bf16 reductions, matmul and row ops equal the f32 op rounded once", "[dtype]") {
  // The claim is about the exact path: on a CPU with AVX512_BF16 a bf16 x bf16 product would
  // otherwise run VDPBF16PS, whose f32 sums differ (kernels/gemm_bf16dot.h).
  kernels::ScopedBf16Dot exact(kernels::Bf16Dot::kExact);
  check_rounded_once([](const V& x) { return sum(x[0], 1); }, {{7, 300}});
  check_rounded_once([](const V& x) { return mean(x[0], 0, true); }, {{300, 7}});
  check_rounded_once([](const V& x) { return matmul(x[0], x[1]); }, {{17, 65}, {65, 7}});
  check_rounded_once([](const V& x) { return matmul(x[0], x[1]); }, {{2, 3, 17, 9}, {2, 3, 9, 5}});
  check_rounded_once([](const V& x) { return matmul_transposed(x[0], x[1]); }, {{2, 17, 9}, {2, 5, 9}});
  check_rounded_once([](const V& x) { return linear(x[0], x[1], x[2]); }, {{5, 33}, {7, 33}, {7}});
  check_rounded_once([](const V& x) { return softmax(x[0]); }, {{9, 31}}, -8.0f, 8.0f);
  check_rounded_once([](const V& x) { return log_softmax(x[0]); }, {{9, 31}}, -8.0f, 8.0f);
  check_rounded_once([](const V& x) { return layer_norm(x[0], x[1], x[2]); }, {{9, 31}, {31}, {31}});
}

TEST_CASE("linear's bias gradient is dY summed over rows, as sum(dY, 0) gives it, in every dtype", "[dtype]") {
  // The bias is broadcast over the rows of the output, so its gradient is the tape's sum of the
  // broadcast gradient: the bits of the reduction sum(dY, 0) (f32 column sums in blocks of 256
  // rows, rounded once). 600 rows: three blocks; 70 columns: a vector tail. Oracle for f32: the
  // float64 column sum, within column_sums' stated error growth (600/256 + 256 roundings, each at
  // most 2^-24 of the sum of |dY|, kernels/rows.h).
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    Generator gen(5);
    const Tensor x = Tensor::uniform({600, 5}, gen, -1.0f, 1.0f, dtype);
    const Tensor w = Tensor::uniform({70, 5}, gen, -1.0f, 1.0f, dtype);
    Tensor bias = Tensor::zeros({70}, dtype).set_requires_grad();
    const Tensor dy = Tensor::uniform({600, 70}, gen, -1.0f, 1.0f, dtype);
    backward(linear(x, w, bias), dy);
    const Tensor want = sum(dy, 0);
    INFO(dtype_name(dtype));
    CHECK(bias.grad().to_vector() == want.to_vector());
    if (dtype != DType::f32) continue;
    const std::vector<float> g = dy.to_vector(), got = bias.grad().to_vector();
    for (size_t j = 0; j < 70; ++j) {
      double exact = 0, magnitude = 0;
      for (size_t i = 0; i < 600; ++i) {
        exact += double(g[i * 70 + j]);
        magnitude += std::abs(double(g[i * 70 + j]));
      }
      CHECK(std::abs(double(got[j]) - exact) <= (600.0 / 256 + 256) * 0x1.0p-24 * magnitude);
    }
  }
}

TEST_CASE("the rounding scope is honoured by every rounding to f16", "[dtype]") {
  // 3e-6 is an f16 subnormal (below 2^-14 = 6.1e-5): nearest keeps it, flush-to-zero makes it +0.
  const Tensor x = Tensor::full({4}, 3e-6f);
  CHECK(x.to(DType::f16).at({0}) != 0.0f);
  {
    auto scope = RoundingScope::flush_to_zero();
    CHECK(x.to(DType::f16).u16()[0] == 0x0000);
    CHECK(mul_scalar(x.to(DType::f32), 1.0f).to(DType::f16).u16()[3] == 0x0000);
  }
  // Stochastic rounding: reproducible for a seed, different for another, unbiased on average.
  // x = 1 + 0.3 ulp (ulp = 2^-10 at 1): rounds up with p = 0.3; the mean of n roundings has
  // standard error ulp sqrt(p (1 - p) / n); 5 sigma for n = 200000 is 5.0e-6.
  const float value = 1.0f + 0.3f * 0x1.0p-10f;
  const Tensor ones = Tensor::full({200000}, value);
  auto stochastic = [&](uint64_t seed) {
    auto scope = RoundingScope::stochastic(seed);
    return ones.to(DType::f16).to_vector();
  };
  const std::vector<float> a = stochastic(1), b = stochastic(1), c = stochastic(2);
  CHECK(a == b);
  CHECK(a != c);
  double m = 0;
  for (float v : a) m += v;
  m /= double(a.size());
  CHECK(std::abs(m - double(value)) < 5.0e-6);
}

TEST_CASE("forward and backward give the same bits with 1 and 2 threads", "[dtype]") {
  auto run = [](int threads) {
    omp_set_num_threads(threads);
    Generator gen(5);
    Tensor x = Tensor::randn({256, 300}, gen).set_requires_grad();
    Tensor w = Tensor::randn({64, 300}, gen, DType::f32, 0, 0.05f).set_requires_grad();
    Tensor g = Tensor::ones({64}).set_requires_grad();
    Tensor h = layer_norm(gelu(linear(x, w)), g, {});
    std::vector<int32_t> labels(256);
    for (int i = 0; i < 256; ++i) labels[size_t(i)] = i % 64;
    Tensor loss = cross_entropy(softmax(h), Indices(labels, {256}));
    backward(loss);
    std::vector<float> bits = {loss.item()};
    for (const Tensor& t : {x, w, g}) {
      const std::vector<float> v = t.grad().to_vector();
      bits.insert(bits.end(), v.begin(), v.end());
    }
    return bits;
  };
  const std::vector<float> one = run(1), two = run(2);
  omp_set_num_threads(omp_get_num_procs());
  CHECK(one == two);
}

TEST_CASE("attention masks inside the softmax: padded keys weigh exactly 0, no inf anywhere", "[dtype]") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    INFO(dtype_name(dtype));
    Generator gen(5);
    const Tensor q = Tensor::uniform({1, 1, 3, 2}, gen, -1.0f, 1.0f, dtype),
                 k = Tensor::uniform({1, 1, 3, 2}, gen, -1.0f, 1.0f, dtype);
    std::vector<float> v_values = {0.5f, -0.25f, 1.0f, 0.75f, -1.0f, 0.125f};
    const Tensor v = Tensor::from_vector(v_values, {1, 1, 3, 2}, dtype);
    v_values[4] = 1000.0f;  // the padded key's value: it must not matter at all
    const Tensor v_changed = Tensor::from_vector(v_values, {1, 1, 3, 2}, dtype);
    DetectAnomaly anomaly_mode;  // throws on the first inf/NaN an op produces (the mask used to be -inf)
    for (const bool causal : {false, true}) {
      const Indices mask({1, 1, 0}, {1, 3});
      const std::vector<float> out = scaled_dot_product_attention(q, k, v, mask, causal).to_vector(),
                               out_changed = scaled_dot_product_attention(q, k, v_changed, mask, causal).to_vector();
      CHECK(out == out_changed);  // the masked key's weight is exactly 0
    }
    // Every key padded: zero weights, so a zero output (where a -inf mask gives NaN).
    const std::vector<float> all_padded = scaled_dot_product_attention(q, k, v, Indices({0, 0, 0}, {1, 3})).to_vector();
    CHECK(all_padded == std::vector<float>(6, 0.0f));
  }
}

TEST_CASE("scaled_masked_softmax is softmax of the scaled scores with masked keys removed", "[dtype]") {
  // Against the unfused ops: in f32, softmax(mul_scalar(x, s)) rounds x s exactly as the fused
  // kernel does, so the bits agree; a key mask of (B, 1, 1, C) and a per-query mask of
  // (B, 1, T, C) each zero exactly their keys and leave the other weights those of the softmax
  // over the remaining keys (one exp per key: within 4 ulp, kernels/rows.h).
  Generator gen(8);
  const int64_t b = 2, h = 3, t = 5;
  Tensor x = Tensor::randn({b, h, t, t}, gen).set_requires_grad();
  const float scale = 0.35355339f;  // 1 / sqrt(8)
  const Tensor dy = Tensor::randn({b, h, t, t}, gen);
  const Tensor fused = scaled_masked_softmax(x, scale, {});
  backward(sum(mul(fused, dy)));
  const std::vector<float> fused_grad = x.grad().to_vector();
  x.zero_grad();
  const Tensor unfused = softmax(mul_scalar(x, scale));
  backward(sum(mul(unfused, dy)));
  CHECK(fused.to_vector() == unfused.to_vector());
  CHECK(fused_grad == x.grad().to_vector());  // y (dy - dot) then times the scale, both rounded

  std::vector<int32_t> keys(size_t(b * t), 0), per_query(size_t(b * t * t), 0);
  keys[3] = keys[size_t(t + 0)] = keys[size_t(t + 4)] = 1;
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = i + 1; j < t; ++j) per_query[size_t((bi * t + i) * t + j)] = 1;  // causal
    }
  }
  const std::vector<float> xs = x.to_vector();
  for (const Indices& mask : {Indices(keys, {b, 1, 1, t}), Indices(per_query, {b, 1, t, t})}) {
    const std::vector<float> y = scaled_masked_softmax(x.detach(), scale, mask).to_vector();
    const bool per_row = mask.shape[2] == t;
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t r = 0; r < h * t; ++r) {
        const int64_t row = bi * h * t + r, mask_row = per_row ? bi * t + r % t : bi;
        double total = 0;
        std::vector<double> e(size_t(t), 0.0);
        for (int64_t j = 0; j < t; ++j) {
          if (mask[mask_row * t + j] == 0) total += e[size_t(j)] = std::exp(double(xs[size_t(row * t + j)]) * scale);
        }
        for (int64_t j = 0; j < t; ++j) {
          const float got = y[size_t(row * t + j)];
          if (mask[mask_row * t + j] != 0) {
            CHECK(got == 0.0f);
          } else {
            // 8 ulp (2^-20): rows.h's 4 ulp, and x s rounded to f32 (|x s| < 2: error <= 2^-24,
            // which moves e^(x s) by as much relative to the exact product's).
            CHECK(got == Approx(e[size_t(j)] / total).epsilon(0x1p-20));
          }
        }
      }
    }
  }
  REQUIRE_THROWS_WITH(scaled_masked_softmax(x, scale, Indices(keys, {b, t})), Catch::Contains("mask of shape"));
}

TEST_CASE("scaled_masked_softmax of a padded batch equals the full rows plus a -inf bias, bit for bit", "[dtype]") {
  // The fused op computes a padded row over its real keys only (the masked tail's weights are
  // exactly 0, and each element keeps its lane of rows.h's sums); the reference adds the -inf
  // bias as a tensor and runs softmax over the whole row. Lengths 37 (no padding), 19, 33
  // (across the 32 lanes), 1 and 0 (no key: zeros); C = 37 > 32 exercises the lane tail.
  Generator gen(9);
  const int64_t b = 5, h = 2, t = 37;
  const std::vector<int64_t> lengths = {37, 19, 33, 1, 0};
  std::vector<int32_t> keys(size_t(b * t), 0);
  std::vector<float> bias(size_t(b * h * t * t), 0.0f);
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t j = lengths[size_t(bi)]; j < t; ++j) {
      keys[size_t(bi * t + j)] = 1;
      for (int64_t r = 0; r < h * t; ++r) bias[size_t((bi * h * t + r) * t + j)] = -INFINITY;
    }
  }
  const float scale = 0.35355339f;
  Tensor x = Tensor::randn({b, h, t, t}, gen).set_requires_grad();
  const Tensor dy = Tensor::randn({b, h, t, t}, gen);
  const Tensor fused = scaled_masked_softmax(x, scale, Indices(keys, {b, 1, 1, t}));
  backward(sum(mul(fused, dy)));
  const std::vector<float> fused_grad = x.grad().to_vector();
  x.zero_grad();
  const Tensor full = softmax(add(mul_scalar(x, scale), Tensor::from_vector(bias, {b, h, t, t})));
  backward(sum(mul(full, dy)));
  const std::vector<float> y = fused.to_vector();
  CHECK(y == full.to_vector());
  CHECK(fused_grad == x.grad().to_vector());    // a masked key's gradient is 0 in both (its sign may differ)
  CHECK(y[size_t(((3 * h) * t) * t)] == 1.0f);  // one real key: weight 1
  CHECK(std::all_of(y.begin() + 4 * h * t * t, y.end(), [](float v) { return v == 0.0f; }));  // no key: zeros
}

}  // namespace hg
