// config.json: what rebuilds a trained TextClassifier -- its ClassifierConfig, the label names
// (class id -> name) and the tokenizer -- in a Hugging Face-like layout
// ({"model_type": "halfgrad-text-classifier", "vocab_size": 256, ..., "id2label": {...},
//   "tokenizer": {"type": "char-ngrams", "ngram_min": 1, "ngram_max": 5, "buckets": 65536}}), plus
// what a re-implementation needs (hidden_act, layer_norm_eps, norm_first, final_layer_norm,
// position_embedding_type, pad_token_id, ...: docs/training.md lists them). Those extra fields
// are not needed to load: config.json files written before them still load. A config without
// "tokenizer", or with the string "bytes" that older versions wrote, is bytes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
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
// Throws hg::Error naming `source` and the missing or invalid field.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace hg::io
