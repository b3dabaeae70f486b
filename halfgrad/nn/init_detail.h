// Parameter initialisers for the layers' constructors (internal to nn/).
#pragma once

#include "halfgrad/autograd/tensor.h"
#include "halfgrad/nn/init.h"

namespace hg::nn::detail {

Tensor init_weight(const Shape& shape, int64_t fan_in, const Init& init);
Tensor init_bias(const Shape& shape, int64_t fan_in, const Init& init);
Tensor init_embedding(const Shape& shape, const Init& init);

}  // namespace hg::nn::detail
