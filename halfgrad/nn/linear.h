// Linear: y = x W^T + b, weight (out_features, in_features), bias (out_features).
// torch.nn.Linear; initialised per halfgrad/nn/init.h.
#pragma once

#include "halfgrad/nn/init.h"
#include "halfgrad/nn/module.h"

namespace hg::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, const Init& init, bool bias = true);
  Tensor forward(const Tensor& x) const;

  Tensor weight, bias;
};

}  // namespace hg::nn
