// config.json: what rebuilds a trained TextClassifier -- its ClassifierConfig, the label names
// (class id -> name) and the tokenizer -- in a Hugging Face-like layout
// ({"model_type": "halfgrad-text-classifier", "vocab_size": 256, ..., "id2label": {...},
//   "tokenizer": {"type": "char-ngrams", "ngram_min": 1, "ngram_max": 5, "buckets": 65536}}), plus
// what a re-implementation needs (hidden_act, layer_norm_eps, norm_first, final_layer_norm,
// position_embedding_type, pad_token_id, ...: docs/training.md lists them). Those extra fields
// are not needed to load: config.json files written before them still load. A config without
// "tokenizer", or with the string "bytes" that older versions wrote, is bytes. A sentencepiece
// tokenizer's model is a file of its own in the checkpoint (sentencepiece.model), which config.json
// names with its 64-bit FNV-1a fingerprint ({"type": "sentencepiece", "spm_type": "unigram",
// "vocab_size": 8000, "model_file": "sentencepiece.model", "model_fnv1a64": "<16 hex digits>"}).
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
};

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
