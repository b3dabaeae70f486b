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

#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "nn/text_classifier.h"

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

nlohmann::json model_config_to_json(const ModelConfig& config);
// Throws hg::Error naming `source` and the missing or invalid field. A sentencepiece tokenizer
// comes back without its model (spm_model empty): model_config_from_checkpoint adds it.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source);

// config.json of a loaded checkpoint directory `dir`, with the sentencepiece model (if the
// tokenizer is one) checked against config.json's fingerprint and vocab_size and attached.
// Throws hg::Error naming the file at fault (a missing or corrupt sentencepiece.model).
ModelConfig model_config_from_checkpoint(const Checkpoint& checkpoint, const std::string& dir);

}  // namespace hg::io
