// Embedding: a lookup table (num_embeddings, dim); row padding_idx (if >= 0) starts at zero and
// receives no gradient. torch.nn.Embedding.
#pragma once

#include "autograd/indices.h"
#include "nn/init.h"
#include "nn/module.h"

namespace hg::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, const Init& init, int32_t padding_idx = -1);
  Tensor forward(const Indices& ids) const;

  Tensor weight;
  int32_t padding_idx;
};

}  // namespace hg::nn
