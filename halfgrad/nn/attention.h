// MultiHeadAttention: q/k/v/out projections (each a Linear(d_model, d_model)) around
// scaled dot-product attention with a padding mask, an optional causal mask and dropout on the
// attention probabilities. Equivalent to torch.nn.MultiheadAttention(batch_first=True) with
// its in_proj split into q_proj, k_proj, v_proj.
#pragma once

#include <memory>

#include "halfgrad/autograd/indices.h"
#include "halfgrad/nn/init.h"
#include "halfgrad/nn/linear.h"
#include "halfgrad/nn/module.h"

namespace hg::nn {

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t heads, const Init& init, float dropout = 0.0f,
                     std::shared_ptr<Generator> dropout_gen = nullptr);
  // x: (B, T, C); attention_mask: (B, T), 1 = real token -> (B, T, C)
  Tensor forward(const Tensor& x, const Indices& attention_mask, bool causal = false) const;

  int64_t heads;
  float dropout;
  std::shared_ptr<Generator> dropout_gen;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
};

}  // namespace hg::nn
