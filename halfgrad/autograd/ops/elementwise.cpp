// Elementwise ops, each forward followed by its backward. The f32 kernels are
// halfgrad/autograd/kernels/elementwise.h, called once per chunk (ops/map.h handles broadcasting, dtypes
// and the single rounding).
#include "halfgrad/autograd/ops/elementwise.h"

#include <vector>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/kernels/elementwise.h"
#include "halfgrad/autograd/ops/map.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"

namespace hg {

using detail::map;
template <size_t K>
using Ptrs = std::array<const float*, K>;

namespace {

using BinaryKernel = void (*)(float*, const float*, const float*, int64_t);
using UnaryKernel = void (*)(float*, const float*, int64_t);

// Binary op with broadcasting: y = kernel(a, b) in f32.
Tensor binary(const Tensor& a, const Tensor& b, const char* op, BinaryKernel kernel) {
  const Shape shape = detail::broadcast_shapes(a.shape(), b.shape(), op);
  const DType dtype = autocast_dtype(CastPolicy::kPromote, {a, b});
  return map<2>(shape, dtype, {a, b}, [kernel](float* y, const Ptrs<2>& x, int64_t n) { kernel(y, x[0], x[1], n); });
}

// Unary op: y = kernel(x) in f32, output in `dtype`.
Tensor unary(const Tensor& x, DType dtype, UnaryKernel kernel) {
  return map<1>(x.shape(), dtype, {x}, [kernel](float* y, const Ptrs<1>& in, int64_t n) { kernel(y, in[0], n); });
}

// Gradient of a unary op from one saved tensor s (the input or the output): dx = kernel(dy, s),
// dx = dy * f'(s) rounded once.
Tensor unary_grad(const Tensor& dy, const Tensor& saved, BinaryKernel kernel) {
  return map<2>(dy.shape(), promote(dy.dtype(), saved.dtype()), {dy, saved},
                [kernel](float* dx, const Ptrs<2>& x, int64_t n) { kernel(dx, x[0], x[1], n); });
}

// Runs an f32-policy op: casts x to f32 under autocast.
Tensor f32_policy_input(const Tensor& x) { return autocast_input(x, autocast_dtype(CastPolicy::kFloat32, {x})); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "add", kernels::add);
  return record("add", y, {a, b}, [a, b](const Tensor& dy) {
    accumulate_grad(a, dy);
    accumulate_grad(b, dy);
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "sub", kernels::sub);
  return record("sub", y, {a, b}, [a, b](const Tensor& dy) {
    accumulate_grad(a, dy);
    if (b.requires_grad()) accumulate_grad(b, neg(dy));
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "mul", kernels::mul);
  return record("mul", y, {a, b}, [a, b](const Tensor& dy) {
    if (a.requires_grad()) accumulate_grad(a, mul(dy, b.detach()));
    if (b.requires_grad()) accumulate_grad(b, mul(dy, a.detach()));
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "div", kernels::div);
  return record("div", y, {a, b}, [a, b](const Tensor& dy) {
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2, computed in one f32 expression, rounded once.
    if (a.requires_grad()) accumulate_grad(a, div(dy, b.detach()));
    if (b.requires_grad()) {
      const Shape shape = detail::broadcast_shapes(dy.shape(), a.shape(), "div backward");
      accumulate_grad(b, map<3>(shape, promote(dy.dtype(), b.dtype()), {dy, a.detach(), b.detach()},
                                [](float* db, const Ptrs<3>& x, int64_t n) {
                                  kernels::div_backward_divisor(db, x[0], x[1], x[2], n);
                                }));
    }
  });
}

Tensor neg(const Tensor& x) {
  Tensor y = unary(x, x.dtype(), kernels::neg);
  return record("neg", y, {x}, [x](const Tensor& dy) { accumulate_grad(x, neg(dy)); });
}

Tensor add_scalar(const Tensor& x, float s) {
  Tensor y = map<1>(x.shape(), x.dtype(), {x},
                    [s](float* out, const Ptrs<1>& in, int64_t n) { kernels::add_scalar(out, in[0], s, n); });
  return record("add_scalar", y, {x}, [x](const Tensor& dy) { accumulate_grad(x, dy); });
}

Tensor mul_scalar(const Tensor& x, float s) {
  Tensor y = map<1>(x.shape(), x.dtype(), {x},
                    [s](float* out, const Ptrs<1>& in, int64_t n) { kernels::mul_scalar(out, in[0], s, n); });
  return record("mul_scalar", y, {x}, [x, s](const Tensor& dy) { accumulate_grad(x, mul_scalar(dy, s)); });
}

Tensor pow_scalar(const Tensor& x0, float p) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = map<1>(x.shape(), x.dtype(), {x},
                    [p](float* out, const Ptrs<1>& in, int64_t n) { kernels::pow_scalar(out, in[0], p, n); });
  return record("pow", y, {x}, [x, p](const Tensor& dy) {
    // d/dx x^p = p x^(p-1)
    accumulate_grad(x, map<2>(dy.shape(), promote(dy.dtype(), x.dtype()), {dy, x.detach()},
                              [p](float* dx, const Ptrs<2>& in, int64_t n) {
                                kernels::pow_scalar_backward(dx, in[0], in[1], p, n);
                              }));
  });
}

Tensor exp(const Tensor& x0) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = unary(x, x.dtype(), kernels::exp);
  // d exp(x) = exp(x): backward reads the output.
  const Tensor saved = y.detach();
  return record("exp", y, {x},
                [x, saved](const Tensor& dy) { accumulate_grad(x, unary_grad(dy, saved, kernels::mul)); });
}

Tensor log(const Tensor& x0) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = unary(x, x.dtype(), kernels::log);
  // d log(x) = 1/x: dy / x, rounded once.
  return record("log", y, {x}, [x](const Tensor& dy) { accumulate_grad(x, unary_grad(dy, x.detach(), kernels::div)); });
}

Tensor sqrt(const Tensor& x0) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = unary(x, x.dtype(), kernels::sqrt);
  const Tensor saved = y.detach();
  return record("sqrt", y, {x},
                [x, saved](const Tensor& dy) { accumulate_grad(x, unary_grad(dy, saved, kernels::sqrt_backward)); });
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary(x, x.dtype(), kernels::tanh);
  const Tensor saved = y.detach();
  return record("tanh", y, {x},
                [x, saved](const Tensor& dy) { accumulate_grad(x, unary_grad(dy, saved, kernels::tanh_backward)); });
}

Tensor relu(const Tensor& x) {
  Tensor y = unary(x, x.dtype(), kernels::relu);
  return record("relu", y, {x}, [x](const Tensor& dy) {
    // relu'(0) = 0, as torch; dy is passed where x > 0 (or NaN), else 0 (torch's threshold_backward).
    accumulate_grad(x, unary_grad(dy, x.detach(), kernels::relu_backward));
  });
}

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  const bool tanh_form = approximation == GeluApproximation::kTanh;
  Tensor y = unary(x, x.dtype(), tanh_form ? kernels::gelu_tanh : kernels::gelu);
  return record("gelu", y, {x}, [x, tanh_form](const Tensor& dy) {
    accumulate_grad(x, unary_grad(dy, x.detach(), tanh_form ? kernels::gelu_tanh_backward : kernels::gelu_backward));
  });
}

Tensor masked_fill(const Tensor& x, const Indices& mask, float value) {
  const Shape shape = detail::broadcast_shapes(x.shape(), mask.shape, "masked_fill");
  check(shape == x.shape(), "masked_fill: mask of shape ", mask.shape, " does not broadcast to x of shape ", x.shape());
  // The mask as a 0/1 f32 tensor, broadcast by map like any input.
  std::vector<float> m(mask.values.begin(), mask.values.end());
  const Tensor keep = Tensor::from_vector(m, mask.shape);
  Tensor y = map<2>(shape, x.dtype(), {x, keep}, [value](float* out, const Ptrs<2>& in, int64_t n) {
    kernels::masked_fill(out, in[0], in[1], value, n);
  });
  return record("masked_fill", y, {x}, [x, keep](const Tensor& dy) {
    accumulate_grad(x, map<2>(dy.shape(), dy.dtype(), {dy, keep}, [](float* out, const Ptrs<2>& in, int64_t n) {
                      kernels::masked_fill(out, in[0], in[1], 0.0f, n);
                    }));
  });
}

}  // namespace hg
