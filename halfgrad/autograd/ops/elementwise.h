// Elementwise ops. Binary ops broadcast numpy-style (dims aligned from the right, size-1 dims
// stretch), compute in f32 and round once to the promoted dtype (policy kPromote); exp, log,
// pow and sqrt are autocast's f32 ops. Backward sums broadcast dims back (tape.h) and uses
// fused f32 kernels, so every gradient is rounded once too.
#pragma once

#include "halfgrad/autograd/indices.h"
#include "halfgrad/autograd/tensor.h"

namespace hg {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor add_scalar(const Tensor& x, float s);
Tensor mul_scalar(const Tensor& x, float s);
Tensor pow_scalar(const Tensor& x, float exponent);  // x^p; d/dx = p x^(p-1)
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);  // relu'(0) = 0, as torch

enum class GeluApproximation { kNone, kTanh };  // torch.nn.functional.gelu(approximate=...)
// kNone: x * Phi(x) with the exact erf; kTanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::kNone);

// Where mask != 0 the result is `value`, elsewhere x; the mask broadcasts to x's shape.
// No gradient flows to masked positions.
Tensor masked_fill(const Tensor& x, const Indices& mask, float value);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& x, float s) { return add_scalar(x, s); }
inline Tensor operator-(const Tensor& x, float s) { return add_scalar(x, -s); }
inline Tensor operator*(const Tensor& x, float s) { return mul_scalar(x, s); }
inline Tensor operator*(float s, const Tensor& x) { return mul_scalar(x, s); }
inline Tensor operator/(const Tensor& x, float s) { return mul_scalar(x, 1.0f / s); }

}  // namespace hg
