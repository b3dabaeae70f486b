// config.json <-> ModelConfig.
#include "train/model_config.h"

#include <charconv>
#include <cstdlib>

#include "autograd/error.h"
#include "data/tokenizer.h"
#include "nn/layer_norm.h"

namespace hg::train {

namespace {

// The shortest decimal that reads back as `value` (1e-05 for 1e-5f, not 9.99999974738e-06).
double shortest_decimal(float value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::strtod(std::string(text, end).c_str(), nullptr);
}

// What a re-implementation needs beyond the sizes, with Hugging Face's names where it has them:
// fixed by halfgrad's architecture or derived from the config, so nothing here is read back to
// build the model; on load, a field that is present must say what this halfgrad builds.
nlohmann::json architecture_fields(const nn::ClassifierConfig& c) {
  nlohmann::json j = {
      {"hidden_act", "gelu"},            // exact: x * Phi(x) with erf, not the tanh approximation
      {"layer_norm_eps", shortest_decimal(nn::LayerNorm::kDefaultEps)},
      {"norm_first", true},              // pre-LN layers: x + attn(ln1(x)), then h + ff(ln2(h))
      {"final_layer_norm", true},        // one more LayerNorm after the last layer, before pooling
      {"position_embedding_type", "absolute"},  // learned, one row per position 0..max_len-1
      {"attention_scale", "1/sqrt(head_dim)"},
      {"pooling_mask", "attention_mask"},  // mean pooling averages the real tokens only
      {"pad_token_id", data::ByteTokenizer::kPad}};
  if (c.pooling == nn::Pooling::kCls) j["cls_token_id"] = data::ByteTokenizer::kCls;  // prepended
  return j;
}

}  // namespace

nlohmann::json model_config_to_json(const ModelConfig& m) {
  const nn::ClassifierConfig& c = m.classifier;
  nlohmann::json id2label = nlohmann::json::object();
  for (size_t i = 0; i < m.labels.size(); ++i) id2label[std::to_string(i)] = m.labels[i];
  nlohmann::json j = {{"model_type", "halfgrad-text-classifier"},
          {"vocab_size", c.vocab},
          {"max_position_embeddings", c.max_len},
          {"hidden_size", c.d_model},
          {"num_attention_heads", c.heads},
          {"intermediate_size", c.d_ff},
          {"num_hidden_layers", c.layers},
          {"num_labels", c.classes},
          {"dropout", c.dropout},
          {"pooling", c.pooling == nn::Pooling::kMean ? "mean" : "cls"},
          {"initializer_range", c.init_std},
          {"tokenizer", "bytes"},
          {"id2label", id2label}};
  j.update(architecture_fields(c));
  return j;
}

ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source) {
  check(j.is_object(), source, ": expected a JSON object");
  // Type first, not j.value(): that throws a bare type_error for a non-string model_type. (Not
  // json == "...": GCC 12 -O3 reports a false -Warray-bounds inside nlohmann's operator== there.)
  const auto model_type = j.find("model_type");
  check(model_type != j.end() && model_type->is_string() &&
            model_type->get_ref<const std::string&>() == "halfgrad-text-classifier",
        source,
        ": model_type is not 'halfgrad-text-classifier' (a config of a different model)");
  auto get = [&](const char* key) -> const nlohmann::json& {
    check(j.contains(key), source, ": missing field '", key, "'");
    return j.at(key);
  };
  ModelConfig m;
  try {
    nn::ClassifierConfig& c = m.classifier;
    c.vocab = get("vocab_size");
    c.max_len = get("max_position_embeddings");
    c.d_model = get("hidden_size");
    c.heads = get("num_attention_heads");
    c.d_ff = get("intermediate_size");
    c.layers = get("num_hidden_layers");
    c.classes = get("num_labels");
    c.dropout = get("dropout");
    const std::string pooling = get("pooling");
    check(pooling == "mean" || pooling == "cls", source, ": pooling must be mean or cls, got '", pooling, "'");
    c.pooling = pooling == "mean" ? nn::Pooling::kMean : nn::Pooling::kCls;
    c.init_std = get("initializer_range");
    const nlohmann::json& id2label = get("id2label");
    for (int64_t i = 0; i < c.classes; ++i) {
      check(id2label.contains(std::to_string(i)), source, ": id2label has no entry for class ", i);
      m.labels.push_back(id2label.at(std::to_string(i)));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": a field has the wrong type (", e.what(), ")");
  }
  try {
    m.classifier.validate();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  const nlohmann::json architecture = architecture_fields(m.classifier);
  for (const auto& [key, value] : architecture.items()) {  // absent in config.json files before them
    check(!j.contains(key) || j.at(key).dump() == value.dump(), source, ": ", key, " is ", j.contains(key) ? j.at(key).dump() : "",
          ", but halfgrad builds ", value.dump());
  }
  return m;
}

}  // namespace hg::train
