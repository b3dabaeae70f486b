// gradcheck: compares the tape's gradients with central finite differences, projected through
// a fixed random tensor R (L = sum(f(x) * R)) so that a sum cannot hide a wrong gradient
// (STYLE.md, after flashlight's Jacobian checks). f32 only: the op itself is the thing tested.
//
// Tolerance: central differences with step h have truncation error O(h^2 |f'''|) and rounding
// error about eps_f32 |L| / h (eps_f32 = 2^-24 relative per op, summed over the L
// evaluation). With h = 1e-3 and |L| <~ 10 on these sizes, the rounding term is ~1e-3 and
// the truncation term ~1e-6, so |analytic - numeric| <= 5e-3 (1 + |numeric|) holds with a
// margin, while a wrong derivative (a missing factor, a sign, a wrong index) is off by O(1).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"

namespace hg::testing {

inline double projected(const Tensor& y, const std::vector<float>& r) {
  const std::vector<float> v = y.to_vector();
  double total = 0;
  for (size_t i = 0; i < v.size(); ++i) total += double(v[i]) * double(r[i]);
  return total;
}

// Checks every element of every input; inputs must be f32 leaves.
inline void gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs,
                      double h = 1e-3, double tolerance = 5e-3) {
  for (Tensor& x : inputs) x.set_requires_grad(true);
  Tensor y = f(inputs);
  Generator gen(1234);
  std::vector<float> r(size_t(y.numel()));
  gen.uniform(r, -1.0f, 1.0f);
  backward(sum(mul(y, Tensor::from_vector(r, y.shape()))));
  for (size_t t = 0; t < inputs.size(); ++t) {
    Tensor& x = inputs[t];
    REQUIRE(x.grad().defined());
    const std::vector<float> analytic = x.grad().to_vector();
    float* data = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      NoGrad no_grad;
      const float saved = data[i];
      const float up = float(saved + h), down = float(saved - h);  // the steps actually taken
      data[i] = up;
      const double plus = projected(f(inputs), r);
      data[i] = down;
      const double minus = projected(f(inputs), r);
      data[i] = saved;
      const double numeric = (plus - minus) / (double(up) - double(down));
      INFO("input " << t << " element " << i << ": analytic " << analytic[size_t(i)] << " numeric " << numeric);
      CHECK(std::abs(analytic[size_t(i)] - numeric) <= tolerance * (1 + std::abs(numeric)));
    }
    x.zero_grad();
  }
}

inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Generator gen(seed);
  return Tensor::uniform(shape, gen, low, high);
}

}  // namespace hg::testing
