// FeedForward: fc2(GELU(fc1(x))), the transformer's position-wise MLP (exact erf GELU, as
// torch.nn.GELU()).
#pragma once

#include <memory>

#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace hg::nn {

class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, const Init& init);
  Tensor forward(const Tensor& x) const;

  std::shared_ptr<Linear> fc1, fc2;
};

}  // namespace hg::nn
