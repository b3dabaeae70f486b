// MultiHeadAttention: project, attend per head in the projections' layout, project.
#include "halfgrad/nn/attention.h"

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/base/error.h"

namespace hg::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t num_heads, const Init& init, float p,
                                       std::shared_ptr<Generator> gen)
    : heads(num_heads), dropout(p), dropout_gen(std::move(gen)) {
  check(num_heads > 0 && d_model % num_heads == 0, "MultiHeadAttention: heads (", num_heads, ") must divide d_model (",
        d_model, ")");
  q_proj = register_module("q_proj", std::make_shared<Linear>(d_model, d_model, init));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d_model, d_model, init));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d_model, d_model, init));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, init));
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Indices& attention_mask, bool causal) const {
  check(x.ndim() == 3, "MultiHeadAttention: input must be (B, T, C), got ", x.shape());
  // v, k, q in this order: the tape follows it, and with it the order x's three gradients are
  // summed in (the order the trainer's fingerprints were recorded with).
  const Tensor v = v_proj->forward(x), k = k_proj->forward(x), q = q_proj->forward(x);
  // The heads are read and written in place in (B, T, C) = (B, T, H, D): no split or merge copies.
  return out_proj->forward(
      multi_head_attention(q, k, v, heads, attention_mask, causal, is_training() ? dropout : 0.0f, dropout_gen.get()));
}

}  // namespace hg::nn
