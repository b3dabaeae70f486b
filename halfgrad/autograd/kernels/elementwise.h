// Elementwise f32 kernels: the arithmetic, the activations and their derivatives behind
// ops/elementwise.cpp, as Highway SIMD loops over plain arrays of n floats (dynamic dispatch picks
// the target); no tensors, dtypes, broadcasting or threads. Scalar twins: reference.h. Every array
// holds n elements; the output may be one of the inputs, no other overlap; n = 0 is a no-op.
// Accuracy on every target (exact ones bit for bit, transcendental ones in ulp):
// docs/autograd.md, "Elementwise kernels".
#pragma once

#include <cstdint>

namespace hg::kernels {

// y = a + b, a - b, a * b, a / b.
void add(float* y, const float* a, const float* b, int64_t n);
void sub(float* y, const float* a, const float* b, int64_t n);
void mul(float* y, const float* a, const float* b, int64_t n);
void div(float* y, const float* a, const float* b, int64_t n);

// y = x + s, x * s, -x.
void add_scalar(float* y, const float* x, float s, int64_t n);
void mul_scalar(float* y, const float* x, float s, int64_t n);
void neg(float* y, const float* x, int64_t n);

// y = mask != 0 ? value : x (torch.Tensor.masked_fill; NaN in the mask counts as set).
void masked_fill(float* y, const float* x, const float* mask, float value, int64_t n);

// y = e^x: overflow to inf above 88.72, e^-inf = 0, NaN kept. Its derivative is mul(dx, dy, y).
void exp(float* y, const float* x, int64_t n);
// y = log x: log 0 = -inf, log of a negative number NaN. Its derivative is div(dx, dy, x).
void log(float* y, const float* x, int64_t n);
// y = sqrt x (correctly rounded; sqrt(-0) = -0).
void sqrt(float* y, const float* x, int64_t n);
// dx = dy * (0.5 / y), y = sqrt x.
void sqrt_backward(float* dx, const float* dy, const float* y, int64_t n);
// y = tanh x.
void tanh(float* y, const float* x, int64_t n);
// dx = dy * ((1 - y) (1 + y)), y = tanh x: 1 - y^2 without its cancellation near |y| = 1.
void tanh_backward(float* dx, const float* dy, const float* y, int64_t n);
// y = x > 0 ? x : 0, NaN kept (torch.relu).
void relu(float* y, const float* x, int64_t n);
// dx = x > 0 ? dy : 0, so relu'(0) = 0 and NaN x passes dy (torch's threshold_backward).
void relu_backward(float* dx, const float* dy, const float* x, int64_t n);

// y = erf x (Highway has none: math-inl.h).
void erf(float* y, const float* x, int64_t n);
// y = x Phi(x), Phi the standard normal CDF (torch.nn.functional.gelu, approximate='none').
// Phi's left tail is computed as erfc, not as 1 + erf, so gelu keeps its relative accuracy for
// x < 0 (torch's f32 formula 0.5 x (1 + erf(x / sqrt 2)) loses it below x = -3).
void gelu(float* y, const float* x, int64_t n);
// dx = dy (Phi(x) + x phi(x)), phi the standard normal density: 6 ulp (3.9) of the larger of
// |Phi(x)| and |x phi(x)| (the two cancel near x = -0.75), times dy.
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n);
// y = 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3) (approximate='tanh'), computed as
// x sigmoid(2u) so that no side cancels. u is rounded to f32 (as in torch): on the left its
// rounding moves the result by up to 5 |u| ulp, a limit of the formula in f32.
void gelu_tanh(float* y, const float* x, int64_t n);
// dx = dy (s + 2 x s (1 - s) u'(x)), s = sigmoid(2u): 6 ulp (5) of the larger term against
// the twin (same f32 u).
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n);

// y = x^p with C's powf special cases (x < 0 gives NaN unless p is an integer; 0^-1 = inf),
// computed as e^(p log|x|) in f64 and rounded once.
void pow_scalar(float* y, const float* x, float p, int64_t n);
// dx = dy * (p * x^(p - 1)), the power as in pow_scalar: within 2 ulp of the twin.
void pow_scalar_backward(float* dx, const float* dy, const float* x, float p, int64_t n);

// db = -dy * a / (b * b): the derivative of a / b with respect to b (div's da is div(dy, b)).
void div_backward_divisor(float* db, const float* dy, const float* a, const float* b, int64_t n);

}  // namespace hg::kernels
