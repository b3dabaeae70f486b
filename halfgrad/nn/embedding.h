// Embedding: a lookup table (num_embeddings, dim); row padding_idx (if >= 0) starts at zero and
// receives no gradient. With sparse, backward gives the table a row-sparse gradient (the rows a
// batch touched, halfgrad/autograd/sparse_rows.h) and the optimizers update only those rows: for tables of
// 2^16 rows and more (docs/sparse_gradients.md). torch.nn.Embedding(..., sparse=...).
#pragma once

#include "halfgrad/autograd/indices.h"
#include "halfgrad/nn/init.h"
#include "halfgrad/nn/module.h"

namespace hg::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, const Init& init, int32_t padding_idx = -1, bool sparse = false);
  Tensor forward(const Indices& ids) const;

  Tensor weight;
  int32_t padding_idx;
  bool sparse;
};

}  // namespace hg::nn
