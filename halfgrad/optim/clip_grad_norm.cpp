// Global gradient norm and clipping.
#include "halfgrad/optim/clip_grad_norm.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "halfgrad/base/error.h"

namespace hg::optim {

float grad_norm(const std::vector<Tensor>& params) {
  double total = 0;
  for (const Tensor& p : params) {
    if (!p.has_grad()) continue;
    const Tensor g = p.grad_values();
    // f32 gradients are read where they are (no widened copy); the sum's order is the same.
    const std::vector<float> widened = g.dtype() == DType::f32 ? std::vector<float>() : g.to_vector();
    const float* values = g.dtype() == DType::f32 ? g.data<float>() : widened.data();
    for (int64_t i = 0, n = g.numel(); i < n; ++i) total += double(values[i]) * double(values[i]);
  }
  return float(std::sqrt(total));
}

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm) {
  check(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  const float norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const float coefficient = max_norm / (norm + 1e-6f);
  if (coefficient >= 1.0f) return norm;
  for (const Tensor& p : params) {
    if (!p.has_grad()) continue;
    const Tensor g = p.grad_values();
    std::vector<float> values = g.to_vector();
    for (float& v : values) v *= coefficient;
    g.assign_nearest(values);
  }
  return norm;
}

}  // namespace hg::optim
