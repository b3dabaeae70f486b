// LayerNorm over the last dim with an affine weight (ones) and bias (zeros). torch.nn.LayerNorm.
#pragma once

#include "halfgrad/nn/module.h"

namespace hg::nn {

class LayerNorm : public Module {
 public:
  static constexpr float kDefaultEps = 1e-5f;  // torch.nn.LayerNorm's; every halfgrad model uses it
  explicit LayerNorm(int64_t dim, float eps = kDefaultEps);
  Tensor forward(const Tensor& x) const;

  Tensor weight, bias;
  float eps;
};

}  // namespace hg::nn
