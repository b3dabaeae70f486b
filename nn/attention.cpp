// MultiHeadAttention: project, split heads, attend, merge heads, project.
#include "nn/attention.h"

#include "autograd/ops.h"
#include "base/error.h"

namespace hg::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t num_heads, const Init& init, float p,
                                       std::shared_ptr<Generator> gen)
    : heads(num_heads), dropout(p), dropout_gen(std::move(gen)) {
  check(num_heads > 0 && d_model % num_heads == 0, "MultiHeadAttention: heads (", num_heads,
        ") must divide d_model (", d_model, ")");
  q_proj = register_module("q_proj", std::make_shared<Linear>(d_model, d_model, init));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d_model, d_model, init));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d_model, d_model, init));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_model, d_model, init));
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Indices& attention_mask, bool causal) const {
  check(x.ndim() == 3, "MultiHeadAttention: input must be (B, T, C), got ", x.shape());
  const int64_t b = x.shape()[0], t = x.shape()[1], c = x.shape()[2], d = c / heads;
  // (B, T, C) -> (B, H, T, D)
  auto split = [&](const Tensor& y) { return permute(reshape(y, {b, t, heads, d}), {0, 2, 1, 3}); };
  const Tensor attended = scaled_dot_product_attention(
      split(q_proj->forward(x)), split(k_proj->forward(x)), split(v_proj->forward(x)), attention_mask, causal,
      is_training() ? dropout : 0.0f, dropout_gen.get());
  return out_proj->forward(reshape(permute(attended, {0, 2, 1, 3}), {b, t, c}));
}

}  // namespace hg::nn
