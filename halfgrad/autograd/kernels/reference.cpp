// The scalar twins of reference.h: one loop per kernel, the kernel's operations in its order.
// Contraction into FMA is off (-ffp-contract=off, see elementwise.cpp), so a build with
// -march=native cannot fuse a * b + c here either.

#include "halfgrad/autograd/kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace hg::kernels::reference {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

size_t count(int64_t n) { return n > 0 ? size_t(n) : 0; }

template <class F>
void each(float* y, int64_t n, F f) {
  for (size_t i = 0; i < count(n); ++i) y[i] = f(i);
}

// rows.h's lane order: partial i mod 32, restarted every 4096 elements into 32 totals, then
// the totals combined pairwise.
template <class F>
float lane_sum(size_t n, F term) {
  float total[32] = {};
  for (size_t block = 0; block < n; block += 4096) {
    float acc[32] = {};
    for (size_t i = block; i < std::min(n, block + 4096); ++i) acc[i % 32] += term(i);
    for (size_t k = 0; k < 32; ++k) total[k] += acc[k];
  }
  for (size_t width = 16; width > 0; width /= 2) {
    for (size_t k = 0; k < width; ++k) total[k] += total[k + width];
  }
  return total[0];
}

float row_max(const float* x, size_t n) {  // ignores NaN; -inf if nothing else
  float m = -kInf;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] > m) m = x[i];
  }
  return m;
}

// The standard normal CDF and density in double, rounded once: gelu's oracle.
float normal_cdf(float x) { return float(0.5 * std::erfc(-double(x) * 0.70710678118654752440)); }
float gelu_slope(float x) {  // Phi(x) + x phi(x)
  const double v = x;
  return float(0.5 * std::erfc(-v * 0.70710678118654752440) + v * 0.39894228040143267794 * std::exp(-0.5 * v * v));
}

float gelu_tanh_argument(float x) { return 0.7978845608028654f * (x + 0.044715f * x * x * x); }

// sigmoid(v) and 1 - sigmoid(v) from e = e^-|v|, as elementwise-inl.h's SigmoidF.
float sigmoid(float v, float* complement) {
  const float e = std::exp(-std::fabs(v));
  const float inv = 1.0f / (1.0f + e);
  const float small = e * inv;
  *complement = v < 0.0f ? inv : small;
  return v < 0.0f ? small : inv;
}

}  // namespace

void add(float* y, const float* a, const float* b, int64_t n) {
  each(y, n, [&](size_t i) { return a[i] + b[i]; });
}
void sub(float* y, const float* a, const float* b, int64_t n) {
  each(y, n, [&](size_t i) { return a[i] - b[i]; });
}
void mul(float* y, const float* a, const float* b, int64_t n) {
  each(y, n, [&](size_t i) { return a[i] * b[i]; });
}
void div(float* y, const float* a, const float* b, int64_t n) {
  each(y, n, [&](size_t i) { return a[i] / b[i]; });
}
void add_scalar(float* y, const float* x, float s, int64_t n) {
  each(y, n, [&](size_t i) { return x[i] + s; });
}
void mul_scalar(float* y, const float* x, float s, int64_t n) {
  each(y, n, [&](size_t i) { return x[i] * s; });
}
void neg(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return -x[i]; });
}
void masked_fill(float* y, const float* x, const float* mask, float value, int64_t n) {
  each(y, n, [&](size_t i) { return mask[i] != 0.0f ? value : x[i]; });
}
void exp(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return std::exp(x[i]); });
}
void log(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return std::log(x[i]); });
}
void sqrt(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return std::sqrt(x[i]); });
}
void sqrt_backward(float* dx, const float* dy, const float* y, int64_t n) {
  each(dx, n, [&](size_t i) { return dy[i] * (0.5f / y[i]); });
}
void tanh(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return std::tanh(x[i]); });
}
void tanh_backward(float* dx, const float* dy, const float* y, int64_t n) {
  each(dx, n, [&](size_t i) { return dy[i] * ((1.0f - y[i]) * (1.0f + y[i])); });
}
void relu(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return x[i] <= 0.0f ? 0.0f : x[i]; });
}
void relu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  each(dx, n, [&](size_t i) { return x[i] <= 0.0f ? 0.0f : dy[i]; });
}
void erf(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return std::erf(x[i]); });
}
void gelu(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) { return x[i] * normal_cdf(x[i]); });
}
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  each(dx, n, [&](size_t i) { return dy[i] * gelu_slope(x[i]); });
}
void gelu_tanh(float* y, const float* x, int64_t n) {
  each(y, n, [&](size_t i) {
    float complement;
    const float u = gelu_tanh_argument(x[i]);
    return x[i] * sigmoid(u + u, &complement);
  });
}
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n) {
  each(dx, n, [&](size_t i) {
    float complement;
    const float v = x[i], u = gelu_tanh_argument(v);
    const float s = sigmoid(u + u, &complement);
    const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * v * v);
    return dy[i] * (s + (v + v) * s * complement * du);
  });
}
void pow_scalar(float* y, const float* x, float p, int64_t n) {
  each(y, n, [&](size_t i) { return std::pow(x[i], p); });
}
void pow_scalar_backward(float* dx, const float* dy, const float* x, float p, int64_t n) {
  each(dx, n, [&](size_t i) { return dy[i] * (p * std::pow(x[i], p - 1.0f)); });
}
void div_backward_divisor(float* db, const float* dy, const float* a, const float* b, int64_t n) {
  each(db, n, [&](size_t i) { return -dy[i] * a[i] / (b[i] * b[i]); });
}

void softmax_forward(float* y, const float* x, int64_t n, int64_t c0, float scale, const float* bias) {
  const size_t c = count(c0);
  std::vector<float> z(c);
  for (size_t r = 0; r < count(n); ++r, x += c, y += c) {
    if (c == 0) continue;
    for (size_t j = 0; j < c; ++j) {
      z[j] = scale != 1.0f ? x[j] * scale : x[j];
      if (bias) z[j] = z[j] + bias[j];
    }
    const float m = row_max(z.data(), c);
    if (m == -kInf) {
      const bool nan = std::any_of(z.begin(), z.end(), [](float v) { return std::isnan(v); });
      std::fill_n(y, c, nan ? kNaN : 0.0f);
      continue;
    }
    for (size_t j = 0; j < c; ++j) y[j] = std::exp(z[j] - m);
    const float inv = 1.0f / lane_sum(c, [&](size_t j) { return y[j]; });
    for (size_t j = 0; j < c; ++j) y[j] = y[j] * inv;
  }
}

void softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c0, float scale) {
  const size_t c = count(c0);
  for (size_t r = 0; r < count(n); ++r, dx += c, dy += c, y += c) {
    const float dot = lane_sum(c, [&](size_t j) { return dy[j] * y[j]; });
    for (size_t j = 0; j < c; ++j) {
      const float g = y[j] * (dy[j] - dot);
      dx[j] = scale != 1.0f ? g * scale : g;
    }
  }
}

void log_softmax_forward(float* y, const float* x, int64_t n, int64_t c0) {
  const size_t c = count(c0);
  for (size_t r = 0; r < count(n); ++r, x += c, y += c) {
    if (c == 0) continue;
    const float m = row_max(x, c);
    const float shift = m + std::log(lane_sum(c, [&](size_t j) { return std::exp(x[j] - m); }));
    for (size_t j = 0; j < c; ++j) y[j] = x[j] - shift;
  }
}

void log_softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c0) {
  const size_t c = count(c0);
  for (size_t r = 0; r < count(n); ++r, dx += c, dy += c, y += c) {
    const float total = lane_sum(c, [&](size_t j) { return dy[j]; });
    for (size_t j = 0; j < c; ++j) dx[j] = dy[j] - std::exp(y[j]) * total;
  }
}

void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t n,
                        int64_t c0, float eps) {
  const size_t c = count(c0);
  for (size_t r = 0; r < count(n); ++r, x += c, y += c) {
    const float mu = lane_sum(c, [&](size_t j) { return x[j]; }) / float(c);
    const float var = lane_sum(c, [&](size_t j) { return (x[j] - mu) * (x[j] - mu); });
    const float rs = 1.0f / std::sqrt(var / float(c) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (size_t j = 0; j < c; ++j) {
      float v = (x[j] - mu) * rs;
      if (w) v = v * w[j];
      if (b) v = v + b[j];
      y[j] = v;
    }
  }
}

void layer_norm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                         const float* mean, const float* rstd, int64_t n, int64_t c0) {
  const size_t c = count(c0);
  for (size_t r = 0; r < count(n); ++r, dy += c, x += c) {
    const float mu = mean[r], rs = rstd[r];
    const auto g = [&](size_t j) { return w ? dy[j] * w[j] : dy[j]; };
    const auto xhat = [&](size_t j) { return (x[j] - mu) * rs; };
    const float mean_g = lane_sum(c, g) / float(c);
    const float mean_gx = lane_sum(c, [&](size_t j) { return g(j) * xhat(j); }) / float(c);
    for (size_t j = 0; j < c; ++j) {
      if (dx) dx[r * c + j] = rs * ((g(j) - mean_g) - xhat(j) * mean_gx);
      if (dw) dw[j] = dw[j] + dy[j] * xhat(j);
      if (db) db[j] = db[j] + dy[j];
    }
  }
}

void row_sums(float* y, const float* x, int64_t n, int64_t c) {
  for (size_t r = 0; r < count(n); ++r) y[r] = lane_sum(count(c), [&](size_t j) { return x[r * count(c) + j]; });
}

void column_sums(float* y, const float* x, int64_t n, int64_t c, int64_t ld) {
  for (size_t j = 0; j < count(c); ++j) {
    float total = 0.0f;
    for (size_t block = 0; block < count(n); block += 256) {
      float acc = 0.0f;
      for (size_t i = block; i < std::min(count(n), block + 256); ++i) acc += x[i * count(ld) + j];
      total += acc;
    }
    y[j] = total;
  }
}

}  // namespace hg::kernels::reference
