// FeedForward: fc2(GELU(fc1(x))), the transformer's position-wise MLP (exact erf GELU, as
// torch.nn.GELU()).
#pragma once

#include <memory>

#include "halfgrad/nn/init.h"
#include "halfgrad/nn/linear.h"
#include "halfgrad/nn/module.h"

namespace hg::nn {

class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, const Init& init);
  Tensor forward(const Tensor& x) const;

  std::shared_ptr<Linear> fc1, fc2;
};

}  // namespace hg::nn
