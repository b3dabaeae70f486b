// Dropout: active only in train mode.
#include "halfgrad/nn/dropout.h"

#include "halfgrad/autograd/ops/nn.h"
#include "halfgrad/base/error.h"

namespace hg::nn {

Dropout::Dropout(float probability, std::shared_ptr<Generator> generator) : p(probability), gen(std::move(generator)) {
  check(p >= 0.0f && p < 1.0f, "Dropout: p must be in [0, 1), got ", p);
  check(p == 0.0f || gen != nullptr, "Dropout: p > 0 needs a generator");
}

Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || p == 0.0f) return x;
  return dropout(x, p, *gen, true);
}

}  // namespace hg::nn
