// TextClassifier construction (in a fixed order, so a seed fixes every weight) and forward.
#include "halfgrad/nn/text_classifier.h"

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/base/error.h"

namespace hg::nn {

std::string to_string(PositionEmbedding p) { return p == PositionEmbedding::kLearned ? "learned" : "none"; }

PositionEmbedding parse_position_embedding(const std::string& name, const std::string& what) {
  for (PositionEmbedding p : {PositionEmbedding::kLearned, PositionEmbedding::kNone}) {
    if (name == to_string(p)) return p;
  }
  fail(what, " must be learned or none, got '", name, "'");
}

void ClassifierConfig::validate() const {
  check(vocab >= 2, "config: vocab must be >= 2, got ", vocab);
  check(max_len >= 1, "config: max_len must be >= 1, got ", max_len);
  check(d_model >= 1 && heads >= 1, "config: d_model and heads must be >= 1, got ", d_model, " and ", heads);
  check(d_model % heads == 0, "config: heads (", heads, ") must divide d_model (", d_model, ")");
  check(d_ff >= 1 && layers >= 0, "config: d_ff must be >= 1 and layers >= 0, got ", d_ff, " and ", layers);
  check(classes >= 2, "config: classes must be >= 2, got ", classes);
  check(pooling == Pooling::kMean || layers >= 1,
        "config: pooling cls needs layers >= 1 (without an encoder layer the CLS token sees no other token)");
  check(!bag_skip || layers >= 1,
        "config: bag_skip needs layers >= 1 (with layers 0 the model is a bag: it has nothing to skip)");
  check(dropout >= 0.0f && dropout < 1.0f, "config: dropout must be in [0, 1), got ", dropout);
  check(encoder_drop_path >= 0.0f && encoder_drop_path < 1.0f, "config: encoder_drop_path must be in [0, 1), got ",
        encoder_drop_path);
  check(
      encoder_drop_path == 0.0f || bag_skip,
      "config: encoder_drop_path needs bag_skip (without the bag path a dropped example has nothing left to classify)");
  check(init_std > 0.0f, "config: init_std must be > 0, got ", init_std);
}

TextClassifier::TextClassifier(const ClassifierConfig& c, uint64_t seed)
    : config(c), dropout_gen(std::make_shared<Generator>(seed ^ 0x9E3779B97F4A7C15ull)) {
  config.validate();
  Generator init_gen(seed);
  const Init init{Init::Scheme::kNormal, c.init_std, &init_gen};
  token_embedding =
      register_module("token_embedding", std::make_shared<Embedding>(c.vocab, c.d_model, init, 0, c.sparse_embedding));
  if (c.position_embedding == PositionEmbedding::kLearned) {
    position_embedding = register_module("position_embedding", std::make_shared<Embedding>(c.max_len, c.d_model, init));
  }
  embedding_dropout = register_module("embedding_dropout", std::make_shared<Dropout>(c.dropout, dropout_gen));
  const EncoderOptions encoder_options{c.d_model, c.heads, c.d_ff, c.layers, c.dropout, false};
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(encoder_options, init, dropout_gen));
  norm = register_module("norm", std::make_shared<LayerNorm>(c.d_model));
  if (c.bag_skip) bag_norm = register_module("bag_norm", std::make_shared<LayerNorm>(c.d_model));
  head = register_module("head", std::make_shared<Linear>(c.d_model, c.classes, init));
}

Tensor TextClassifier::forward(const Indices& ids, const Indices& attention_mask) const {
  check(ids.shape.ndim() == 2 && attention_mask.shape == ids.shape, "TextClassifier: ids ", ids.shape,
        " and attention_mask ", attention_mask.shape, " must both be (B, T)");
  const int64_t b = ids.shape[0], t = ids.shape[1];
  check(t <= config.max_len, "TextClassifier: sequence length ", t, " exceeds max_len ", config.max_len);
  const Tensor tokens = token_embedding->forward(ids);
  Tensor x = tokens;
  if (position_embedding) {
    std::vector<int32_t> positions(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) positions[size_t(i)] = int32_t(i);
    x = add(x, position_embedding->forward(Indices(positions, {t})));
  }
  x = embedding_dropout->forward(x);
  const Tensor h = norm->forward(encoder->forward(x, attention_mask));
  Tensor pooled = config.pooling == Pooling::kMean ? masked_mean(h, attention_mask)
                                                   : reshape(narrow(h, 1, 0, 1), {b, config.d_model});
  if (config.encoder_drop_path > 0.0f && is_training()) {
    // Stochastic depth on the encoder branch (Huang et al. 2016, arXiv:1603.09382; timm's
    // drop_path): one dropout draw per example, shared by its d_model columns.
    pooled = mul(pooled, dropout(Tensor::ones({b, 1}), config.encoder_drop_path, *dropout_gen));
  }
  if (bag_norm) {  // the bag's representation: its tokens without positions (x is them when there are none)
    const Tensor bag_tokens = position_embedding ? embedding_dropout->forward(tokens) : x;
    pooled = add(pooled, masked_mean(bag_norm->forward(bag_tokens), attention_mask));
  }
  return head->forward(pooled);
}

}  // namespace hg::nn
