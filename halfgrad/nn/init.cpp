// Initialisers shared by the layers (halfgrad/nn/init.h documents the schemes).
#include "halfgrad/nn/init_detail.h"

#include <cmath>

#include "halfgrad/base/error.h"

namespace hg::nn::detail {

Generator& generator(const Init& init) {
  check(init.gen != nullptr, "nn::Init: a Generator is required to initialise parameters");
  return *init.gen;
}

Tensor init_weight(const Shape& shape, int64_t fan_in, const Init& init) {
  if (init.scheme == Init::Scheme::kNormal) return Tensor::randn(shape, generator(init), DType::f32, 0.0f, init.std);
  const float bound = 1.0f / std::sqrt(float(fan_in));
  return Tensor::uniform(shape, generator(init), -bound, bound);
}

Tensor init_bias(const Shape& shape, int64_t fan_in, const Init& init) {
  if (init.scheme == Init::Scheme::kNormal) return Tensor::zeros(shape);
  const float bound = 1.0f / std::sqrt(float(fan_in));
  return Tensor::uniform(shape, generator(init), -bound, bound);
}

Tensor init_embedding(const Shape& shape, const Init& init) {
  return Tensor::randn(shape, generator(init), DType::f32, 0.0f,
                       init.scheme == Init::Scheme::kNormal ? init.std : 1.0f);
}

}  // namespace hg::nn::detail
