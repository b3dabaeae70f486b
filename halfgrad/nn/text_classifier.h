// TextClassifier: the model halfgrad trains. Token ids (0 = padding) plus learned position
// embeddings, a pre-LN TransformerEncoder, a final LayerNorm, pooling (mean or CLS), a linear head:
//   logits = head(pool(norm(encoder(dropout(tok[ids] + pos[0..T)), mask)), mask))
// With no positions and no layers it is fastText's bag plus a LayerNorm; bag_skip and
// encoder_drop_path are in docs/classifier.md, "The bag model". ClassifierConfig is what a
// checkpoint saves to rebuild the model.
#pragma once

#include <memory>
#include <string>

#include "halfgrad/autograd/indices.h"
#include "halfgrad/nn/embedding.h"
#include "halfgrad/nn/transformer.h"

namespace hg::nn {

enum class Pooling { kMean, kCls };
enum class PositionEmbedding { kLearned, kNone };  // kNone: the sequence is a bag of tokens

// "learned" | "none" (config.json's position_embedding, --positions); parse_position_embedding
// throws hg::Error naming `what` and the allowed names.
std::string to_string(PositionEmbedding p);
PositionEmbedding parse_position_embedding(const std::string& name, const std::string& what = "position_embedding");

struct ClassifierConfig {
  int64_t vocab = 256;  // token ids in [0, vocab); id 0 is padding
  int64_t max_len = 32;
  int64_t d_model = 128, heads = 4, d_ff = 512, layers = 2;
  int64_t classes = 2;
  float dropout = 0.1f;
  Pooling pooling = Pooling::kMean;
  PositionEmbedding position_embedding = PositionEmbedding::kLearned;
  // The token table's gradient holds only the rows a batch used (docs/sparse_gradients.md): a
  // hashed vocabulary of 2^16+ rows then costs what a batch touches. Training only: the
  // optimizer updates those rows lazily; the model's values and outputs are the same.
  bool sparse_embedding = false;
  // Adds the mean over real tokens of bag_norm(dropout(tok[ids])) to the pooled output (needs
  // layers >= 1: without an encoder the model is that bag already).
  bool bag_skip = false;
  // With bag_skip: in training each example's pooled encoder output is dropped with this
  // probability, and kept ones scaled by 1 / (1 - p) (DropPath on the encoder branch), so that the
  // bag path also learns to classify alone. 0: off. No effect in evaluation.
  float encoder_drop_path = 0.0f;
  float init_std = 0.02f;  // weights ~ N(0, init_std), biases 0 (halfgrad/nn/init.h kNormal)

  // Throws hg::Error naming the first field that is out of range (e.g. heads not dividing
  // d_model).
  void validate() const;
  bool operator==(const ClassifierConfig&) const = default;
};

class TextClassifier : public Module {
 public:
  TextClassifier(const ClassifierConfig& config, uint64_t seed);
  // ids, attention_mask: (B, T) with T <= max_len, mask 1 = real token -> logits (B, classes)
  Tensor forward(const Indices& ids, const Indices& attention_mask) const;

  ClassifierConfig config;
  std::shared_ptr<Generator> dropout_gen;                          // all dropout masks; its state is checkpointed
  std::shared_ptr<Embedding> token_embedding, position_embedding;  // position_embedding: null with kNone
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<LayerNorm> bag_norm;  // null without bag_skip
  std::shared_ptr<Linear> head;
  std::shared_ptr<Dropout> embedding_dropout;
};

}  // namespace hg::nn
