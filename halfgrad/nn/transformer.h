// The pre-LN transformer encoder (Xiong et al. 2020, "On Layer Normalization in the
// Transformer Architecture"): each layer is
//   x = x + dropout(attn(ln1(x)));  x = x + dropout(ff(ln2(x)))
// TransformerEncoder stacks `layers` of them (names `layers.<i>.*`).
#pragma once

#include <memory>
#include <vector>

#include "halfgrad/nn/attention.h"
#include "halfgrad/nn/dropout.h"
#include "halfgrad/nn/feed_forward.h"
#include "halfgrad/nn/layer_norm.h"

namespace hg::nn {

struct EncoderOptions {
  int64_t d_model = 128, heads = 4, d_ff = 512, layers = 2;
  float dropout = 0.1f;
  bool causal = false;
};

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(const EncoderOptions& options, const Init& init, std::shared_ptr<Generator> dropout_gen);
  // x: (B, T, C), attention_mask: (B, T) -> (B, T, C)
  Tensor forward(const Tensor& x, const Indices& attention_mask) const;

  bool causal;
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<Dropout> drop1, drop2;
};

class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const EncoderOptions& options, const Init& init, std::shared_ptr<Generator> dropout_gen);
  Tensor forward(const Tensor& x, const Indices& attention_mask) const;

  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers;
};

}  // namespace hg::nn
