// Embedding: the table, with the padding row zeroed at initialisation (as torch).
#include "halfgrad/nn/embedding.h"

#include <cstring>

#include "halfgrad/autograd/ops/nn.h"
#include "halfgrad/base/error.h"
#include "halfgrad/nn/init_detail.h"

namespace hg::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, const Init& init, int32_t padding, bool row_sparse)
    : padding_idx(padding), sparse(row_sparse) {
  check(padding < num_embeddings, "Embedding: padding_idx ", padding, " >= num_embeddings ", num_embeddings);
  Tensor table = detail::init_embedding({num_embeddings, dim}, init);
  if (padding >= 0) std::memset(table.f32().data() + padding * dim, 0, size_t(dim) * sizeof(float));
  weight = register_parameter("weight", table);
}

Tensor Embedding::forward(const Indices& ids) const { return embedding(ids, weight, padding_idx, sparse); }

}  // namespace hg::nn
