// LayerNorm over the last dim with an affine weight (ones) and bias (zeros). torch.nn.LayerNorm.
#pragma once

#include "nn/module.h"

namespace hg::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f);
  Tensor forward(const Tensor& x) const;

  Tensor weight, bias;
  float eps;
};

}  // namespace hg::nn
