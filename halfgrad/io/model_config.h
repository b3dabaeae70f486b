// config.json: what rebuilds a trained TextClassifier -- its ClassifierConfig, the label names and
// the tokenizer -- in a Hugging Face-like layout, plus fields a re-implementation needs (not needed
// to load). The layout and the older forms that still load: docs/design_notes.md#configjson.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/data/tokenizer.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/nn/text_classifier.h"

namespace hg::io {

struct ModelConfig {
  nn::ClassifierConfig classifier;
  std::vector<std::string> labels;
  data::TokenizerConfig tokenizer;
  bool operator==(const ModelConfig&) const = default;  // the resume check (Trainer)
};

// The fields of a classifier config its tokenizer decides (set config.pooling first): vocab, the
// tokenizer's ids plus the CLS id under cls pooling (TokenizerConfig::model_vocab), and
// sparse_embedding, true for the hashed tokenizers (2^16+ rows, few touched per batch: row-sparse
// gradients, docs/classifier.md).
void fit_to_tokenizer(nn::ClassifierConfig& config, const data::TokenizerConfig& tokenizer);

// The "tokenizer" object (also stored in TrainingArguments' JSON). from_json throws hg::Error
// naming `source` and the bad field.
nlohmann::json tokenizer_config_to_json(const data::TokenizerConfig& config);
data::TokenizerConfig tokenizer_config_from_json(const nlohmann::json& j, const std::string& source);

// The largest architecture a config may describe: the `halfgrad train` flags' ranges
// (demos/halfgrad_cli.h uses these), so a config.json cannot ask for more than training could
// build (a huge num_hidden_layers would allocate without bound).
struct ArchitectureCaps {
  static constexpr int64_t kLayers = 128, kHeads = 256, kDModel = 8192, kDFf = 65536, kMaxLen = 4096;
  static constexpr int64_t kBuckets = int64_t{1} << 28;
  static constexpr int64_t kVocab = kBuckets + 2;  // hashed: buckets + 1, + 1 with CLS
};

// The one rule a model config must satisfy by itself (every loaded config.json, and the
// Trainer's model): every size within ArchitectureCaps, and vocab_size equal to the vocabulary
// its tokenizer produces (data::Tokenizer::vocab_size: bytes 256, hashed buckets + 1; + 1 with
// CLS pooling), so a config whose buckets changed without vocab_size, or whose tokenizer entry
// was dropped (bytes then), is refused instead of mapping texts to other rows. A new tokenizer
// kind extends Tokenizer::vocab_size, not this. `tokenizer_given`: whether config.json had a
// "tokenizer" entry (named in the message when it had none). Throws hg::Error naming `source`.
void check_model_config(const ModelConfig& config, const std::string& source, bool tokenizer_given = true);

// The config against the weights of model.safetensors, before a model is built from it (so its
// allocation is bounded by the file): token_embedding.weight is (vocab_size, hidden_size),
// head.weight (num_labels, hidden_size), position_embedding.weight (max_position_embeddings,
// hidden_size) when learned, and the file holds exactly num_hidden_layers encoder layers.
// Throws hg::Error naming `file`, the tensor and both shapes.
void check_config_matches_weights(const ModelConfig& config, const nn::StateDict& weights, const std::string& file);

nlohmann::json model_config_to_json(const ModelConfig& config);
// Throws hg::Error naming `source` and the missing or invalid field (check_model_config included).
// A sentencepiece tokenizer comes back without its model (spm_model empty):
// model_config_from_checkpoint adds it.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source);

// config.json of a loaded checkpoint directory `dir`, with the sentencepiece model (if the
// tokenizer is one) checked against config.json's fingerprint and vocab_size and attached.
// Throws hg::Error naming the file at fault (a missing or corrupt sentencepiece.model).
ModelConfig model_config_from_checkpoint(const Checkpoint& checkpoint, const std::string& dir);

}  // namespace hg::io
