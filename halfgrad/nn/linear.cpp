// Linear: parameters and forward (the op is halfgrad/autograd/ops/matmul.h's linear).
#include "halfgrad/nn/linear.h"

#include "halfgrad/autograd/ops/matmul.h"
#include "halfgrad/nn/init_detail.h"

namespace hg::nn {

Linear::Linear(int64_t in_features, int64_t out_features, const Init& init, bool with_bias) {
  weight = register_parameter("weight", detail::init_weight({out_features, in_features}, in_features, init));
  if (with_bias) bias = register_parameter("bias", detail::init_bias({out_features}, in_features, init));
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

}  // namespace hg::nn
