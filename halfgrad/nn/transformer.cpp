// Pre-LN encoder layers and their stack.
#include "halfgrad/nn/transformer.h"

#include <string>

#include "halfgrad/autograd/ops/elementwise.h"

namespace hg::nn {

TransformerEncoderLayer::TransformerEncoderLayer(const EncoderOptions& o, const Init& init,
                                                 std::shared_ptr<Generator> gen)
    : causal(o.causal) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(o.d_model));
  attn = register_module("attn", std::make_shared<MultiHeadAttention>(o.d_model, o.heads, init, o.dropout, gen));
  drop1 = register_module("drop1", std::make_shared<Dropout>(o.dropout, gen));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(o.d_model));
  ff = register_module("ff", std::make_shared<FeedForward>(o.d_model, o.d_ff, init));
  drop2 = register_module("drop2", std::make_shared<Dropout>(o.dropout, gen));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Indices& attention_mask) const {
  const Tensor h = add(x, drop1->forward(attn->forward(ln1->forward(x), attention_mask, causal)));
  return add(h, drop2->forward(ff->forward(ln2->forward(h))));
}

TransformerEncoder::TransformerEncoder(const EncoderOptions& o, const Init& init, std::shared_ptr<Generator> gen) {
  for (int64_t i = 0; i < o.layers; ++i) {
    layers.push_back(
        register_module("layers." + std::to_string(i), std::make_shared<TransformerEncoderLayer>(o, init, gen)));
  }
}

Tensor TransformerEncoder::forward(const Tensor& x, const Indices& attention_mask) const {
  Tensor h = x;
  for (const auto& layer : layers) h = layer->forward(h, attention_mask);
  return h;
}

}  // namespace hg::nn
