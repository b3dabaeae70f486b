// The scalar twins of elementwise.h and rows.h: plain loops, the tests' oracle and a debug path
// (swap a kernel for its twin to rule the SIMD code out). Same arguments, shapes and meaning as
// the kernel of the same name. Each twin performs the kernel's IEEE operations in the kernel's
// order, so where a kernel is exact (elementwise.h, rows.h say which) the two agree bit for
// bit. Transcendental functions come from <cmath> in f32 (glibc's expf, logf, tanhf, erff,
// powf: within 1 ulp), except gelu and gelu_backward, whose Phi(x) and Phi(x) + x phi(x) are
// evaluated in double and rounded once; the kernels agree within the bounds their headers state.
#pragma once

#include <cstdint>

namespace hg::kernels::reference {

// elementwise.h
void add(float* y, const float* a, const float* b, int64_t n);
void sub(float* y, const float* a, const float* b, int64_t n);
void mul(float* y, const float* a, const float* b, int64_t n);
void div(float* y, const float* a, const float* b, int64_t n);
void add_scalar(float* y, const float* x, float s, int64_t n);
void mul_scalar(float* y, const float* x, float s, int64_t n);
void neg(float* y, const float* x, int64_t n);
void masked_fill(float* y, const float* x, const float* mask, float value, int64_t n);
void exp(float* y, const float* x, int64_t n);
void log(float* y, const float* x, int64_t n);
void sqrt(float* y, const float* x, int64_t n);
void sqrt_backward(float* dx, const float* dy, const float* y, int64_t n);
void tanh(float* y, const float* x, int64_t n);
void tanh_backward(float* dx, const float* dy, const float* y, int64_t n);
void relu(float* y, const float* x, int64_t n);
void relu_backward(float* dx, const float* dy, const float* x, int64_t n);
void erf(float* y, const float* x, int64_t n);
void gelu(float* y, const float* x, int64_t n);
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n);
void gelu_tanh(float* y, const float* x, int64_t n);
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n);
void pow_scalar(float* y, const float* x, float p, int64_t n);
void pow_scalar_backward(float* dx, const float* dy, const float* x, float p, int64_t n);
void div_backward_divisor(float* db, const float* dy, const float* a, const float* b, int64_t n);

// rows.h
void softmax_forward(float* y, const float* x, int64_t n, int64_t c, float scale = 1.0f, const float* bias = nullptr);
void softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c, float scale = 1.0f);
void log_softmax_forward(float* y, const float* x, int64_t n, int64_t c);
void log_softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c);
void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t n,
                        int64_t c, float eps);
void layer_norm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                         const float* mean, const float* rstd, int64_t n, int64_t c);
void row_sums(float* y, const float* x, int64_t n, int64_t c);
void column_sums(float* y, const float* x, int64_t n, int64_t c, int64_t ld);

}  // namespace hg::kernels::reference
