// FeedForward: Linear-GELU-Linear.
#include "halfgrad/nn/feed_forward.h"

#include "halfgrad/autograd/ops/elementwise.h"

namespace hg::nn {

FeedForward::FeedForward(int64_t d_model, int64_t d_ff, const Init& init) {
  fc1 = register_module("fc1", std::make_shared<Linear>(d_model, d_ff, init));
  fc2 = register_module("fc2", std::make_shared<Linear>(d_ff, d_model, init));
}

Tensor FeedForward::forward(const Tensor& x) const { return fc2->forward(gelu(fc1->forward(x))); }

}  // namespace hg::nn
