// Elementwise ops, each forward followed by its backward. Kernels are f32 loops over one
// chunk (ops/map.h handles broadcasting, dtypes and the single rounding).
#include "autograd/ops/elementwise.h"

#include <cmath>
#include <numbers>

#include "autograd/autocast.h"
#include "autograd/error.h"
#include "autograd/ops/map.h"
#include "autograd/tape.h"

namespace hg {

using detail::map;
template <size_t K>
using Ptrs = std::array<const float*, K>;

namespace {

// Binary op with broadcasting: y[i] = f(a[i], b[i]) in f32.
template <class F>
Tensor binary(const Tensor& a, const Tensor& b, const char* op, F f) {
  const Shape shape = detail::broadcast_shapes(a.shape(), b.shape(), op);
  const DType dtype = autocast_dtype(CastPolicy::kPromote, {a, b});
  return map<2>(shape, dtype, {a, b}, [f](float* y, const Ptrs<2>& x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(x[0][i], x[1][i]);
  });
}

// Unary op: y[i] = f(x[i]) in f32, output in `dtype`.
template <class F>
Tensor unary(const Tensor& x, DType dtype, F f) {
  return map<1>(x.shape(), dtype, {x}, [f](float* y, const Ptrs<1>& in, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(in[0][i]);
  });
}

// Gradient of a unary op from one saved tensor s (the input or the output):
// dx[i] = dy[i] * f'(s[i]), rounded once.
template <class F>
Tensor unary_grad(const Tensor& dy, const Tensor& saved, F derivative) {
  return map<2>(dy.shape(), promote(dy.dtype(), saved.dtype()), {dy, saved},
                [derivative](float* y, const Ptrs<2>& x, int64_t n) {
                  for (int64_t i = 0; i < n; ++i) y[i] = x[0][i] * derivative(x[1][i]);
                });
}

// Runs an f32-policy op: casts x to f32 under autocast.
Tensor f32_policy_input(const Tensor& x) {
  return autocast_input(x, autocast_dtype(CastPolicy::kFloat32, {x}));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "add", [](float p, float q) { return p + q; });
  return record("add", y, {a, b}, [a, b](const Tensor& dy) {
    accumulate_grad(a, dy);
    accumulate_grad(b, dy);
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "sub", [](float p, float q) { return p - q; });
  return record("sub", y, {a, b}, [a, b](const Tensor& dy) {
    accumulate_grad(a, dy);
    if (b.requires_grad()) accumulate_grad(b, neg(dy));
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "mul", [](float p, float q) { return p * q; });
  return record("mul", y, {a, b}, [a, b](const Tensor& dy) {
    if (a.requires_grad()) accumulate_grad(a, mul(dy, b.detach()));
    if (b.requires_grad()) accumulate_grad(b, mul(dy, a.detach()));
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = binary(a, b, "div", [](float p, float q) { return p / q; });
  return record("div", y, {a, b}, [a, b](const Tensor& dy) {
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2, computed in one f32 expression, rounded once.
    if (a.requires_grad()) accumulate_grad(a, div(dy, b.detach()));
    if (b.requires_grad()) {
      const Shape shape = detail::broadcast_shapes(dy.shape(), a.shape(), "div backward");
      const Tensor bb = b.detach(), aa = a.detach();
      accumulate_grad(b, map<3>(shape, promote(dy.dtype(), b.dtype()), {dy, aa, bb},
                                [](float* y, const Ptrs<3>& x, int64_t n) {
                                  for (int64_t i = 0; i < n; ++i) y[i] = -x[0][i] * x[1][i] / (x[2][i] * x[2][i]);
                                }));
    }
  });
}

Tensor neg(const Tensor& x) {
  Tensor y = unary(x, x.dtype(), [](float v) { return -v; });
  return record("neg", y, {x}, [x](const Tensor& dy) { accumulate_grad(x, neg(dy)); });
}

Tensor add_scalar(const Tensor& x, float s) {
  Tensor y = unary(x, x.dtype(), [s](float v) { return v + s; });
  return record("add_scalar", y, {x}, [x](const Tensor& dy) { accumulate_grad(x, dy); });
}

Tensor mul_scalar(const Tensor& x, float s) {
  Tensor y = unary(x, x.dtype(), [s](float v) { return v * s; });
  return record("mul_scalar", y, {x}, [x, s](const Tensor& dy) { accumulate_grad(x, mul_scalar(dy, s)); });
}

Tensor pow_scalar(const Tensor& x0, float p) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = unary(x, x.dtype(), [p](float v) { return std::pow(v, p); });
  return record("pow", y, {x}, [x, p](const Tensor& dy) {
    accumulate_grad(x, unary_grad(dy, x.detach(), [p](float v) { return p * std::pow(v, p - 1.0f); }));
  });
}

Tensor exp(const Tensor& x0) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = unary(x, x.dtype(), [](float v) { return std::exp(v); });
  // d exp(x) = exp(x): backward reads the output.
  const Tensor saved = y.detach();
  return record("exp", y, {x}, [x, saved](const Tensor& dy) {
    accumulate_grad(x, unary_grad(dy, saved, [](float e) { return e; }));
  });
}

Tensor log(const Tensor& x0) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = unary(x, x.dtype(), [](float v) { return std::log(v); });
  return record("log", y, {x}, [x](const Tensor& dy) {
    accumulate_grad(x, unary_grad(dy, x.detach(), [](float v) { return 1.0f / v; }));
  });
}

Tensor sqrt(const Tensor& x0) {
  const Tensor x = f32_policy_input(x0);
  Tensor y = unary(x, x.dtype(), [](float v) { return std::sqrt(v); });
  const Tensor saved = y.detach();
  return record("sqrt", y, {x}, [x, saved](const Tensor& dy) {
    accumulate_grad(x, unary_grad(dy, saved, [](float r) { return 0.5f / r; }));
  });
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary(x, x.dtype(), [](float v) { return std::tanh(v); });
  const Tensor saved = y.detach();
  return record("tanh", y, {x}, [x, saved](const Tensor& dy) {
    accumulate_grad(x, unary_grad(dy, saved, [](float t) { return 1.0f - t * t; }));
  });
}

Tensor relu(const Tensor& x) {
  Tensor y = unary(x, x.dtype(), [](float v) { return v > 0.0f ? v : 0.0f; });
  return record("relu", y, {x}, [x](const Tensor& dy) {
    // relu'(0) = 0, as torch.
    accumulate_grad(x, unary_grad(dy, x.detach(), [](float v) { return v > 0.0f ? 1.0f : 0.0f; }));
  });
}

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1/sqrt(2 pi)

float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}
float gelu_tanh_derivative(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = std::tanh(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}
float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }
// d/dx x Phi(x) = Phi(x) + x phi(x)
float gelu_erf_derivative(float x) {
  return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
}

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  const bool tanh_form = approximation == GeluApproximation::kTanh;
  Tensor y = tanh_form ? unary(x, x.dtype(), gelu_tanh) : unary(x, x.dtype(), gelu_erf);
  return record("gelu", y, {x}, [x, tanh_form](const Tensor& dy) {
    accumulate_grad(x, tanh_form ? unary_grad(dy, x.detach(), gelu_tanh_derivative)
                                 : unary_grad(dy, x.detach(), gelu_erf_derivative));
  });
}

Tensor masked_fill(const Tensor& x, const Indices& mask, float value) {
  const Shape shape = detail::broadcast_shapes(x.shape(), mask.shape, "masked_fill");
  check(shape == x.shape(), "masked_fill: mask of shape ", mask.shape.str(),
        " does not broadcast to x of shape ", x.shape().str());
  // The mask as a 0/1 f32 tensor, broadcast by map like any input.
  std::vector<float> m(mask.values.begin(), mask.values.end());
  const Tensor keep = Tensor::from_vector(m, mask.shape);
  Tensor y = map<2>(shape, x.dtype(), {x, keep}, [value](float* out, const Ptrs<2>& in, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[1][i] != 0.0f ? value : in[0][i];
  });
  return record("masked_fill", y, {x}, [x, keep](const Tensor& dy) {
    accumulate_grad(x, map<2>(dy.shape(), dy.dtype(), {dy, keep}, [](float* out, const Ptrs<2>& in, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = in[1][i] != 0.0f ? 0.0f : in[0][i];
    }));
  });
}

}  // namespace hg
