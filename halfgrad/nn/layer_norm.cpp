// LayerNorm: weight 1, bias 0.
#include "halfgrad/nn/layer_norm.h"

#include "halfgrad/autograd/ops/nn.h"

namespace hg::nn {

LayerNorm::LayerNorm(int64_t dim, float epsilon) : eps(epsilon) {
  weight = register_parameter("weight", Tensor::ones({dim}));
  bias = register_parameter("bias", Tensor::zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps); }

}  // namespace hg::nn
