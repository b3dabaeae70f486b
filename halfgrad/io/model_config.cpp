// config.json <-> ModelConfig.
#include "halfgrad/io/model_config.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "halfgrad/autograd/json_read.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/fingerprint.h"
#include "halfgrad/data/tokenizer.h"
#include "halfgrad/nn/layer_norm.h"

namespace hg::io {

namespace {

// The model bytes' 64-bit FNV-1a (halfgrad/base/fingerprint.h), 16 hex digits: config.json's model_fnv1a64.
std::string spm_model_fingerprint(const std::string& model) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(model.data(), model.size())));
  return hex;
}

// A JSON string equal to `text` (not json == "...": see model_config_from_json).
bool is_string_equal(const nlohmann::json& value, const std::string& text) {
  return value.is_string() && value.get_ref<const std::string&>() == text;
}

}  // namespace

void fit_to_tokenizer(nn::ClassifierConfig& config, const data::TokenizerConfig& tokenizer) {
  config.vocab = tokenizer.model_vocab(config.pooling == nn::Pooling::kCls);
  config.sparse_embedding = tokenizer.hashed();
}

nlohmann::json tokenizer_config_to_json(const data::TokenizerConfig& t) {
  nlohmann::json j = {{"type", std::string(data::kTokenizerKindNames.name(t.kind))}};
  if (t.kind == data::TokenizerKind::kSentencePiece) {
    j["spm_type"] = std::string(data::kSpmTypeNames.name(t.spm_type));
    j["vocab_size"] = t.spm_vocab_size;
    if (!t.spm_model.empty()) {
      j["model_file"] = kTokenizerModelFile;
      j["model_fnv1a64"] = spm_model_fingerprint(t.spm_model);
    }
    return j;
  }
  if (t.kind == data::TokenizerKind::kCharNgrams) {
    j["ngram_min"] = t.ngram_min;
    j["ngram_max"] = t.ngram_max;
  }
  // Only when not 2: config.json files of word bags stay as they were before word_ngrams.
  if (t.kind == data::TokenizerKind::kWords && t.word_ngrams != 2) j["word_ngrams"] = t.word_ngrams;
  if (t.kind != data::TokenizerKind::kBytes) j["buckets"] = t.buckets;
  return j;
}

data::TokenizerConfig tokenizer_config_from_json(const nlohmann::json& j, const std::string& source) {
  data::TokenizerConfig t;
  if (j.is_string() && j.get_ref<const std::string&>() == "bytes") return t;  // what older versions wrote
  check(j.is_object(), source, ": tokenizer: expected an object like {\"type\": \"bytes\"}");
  try {
    for (const auto& [key, value] : j.items()) {
      const std::string at = "tokenizer: key '" + key + "'";
      const auto set = [&v = value, &at](auto& field) {
        json_read::read(v, at, field);
      };  // &v: clang 14 cannot capture a binding
      if (key == "type")
        t.kind = data::kTokenizerKindNames.parse(json_read::as<std::string>(value, at), "tokenizer: type");
      else if (key == "ngram_min")
        set(t.ngram_min);
      else if (key == "ngram_max")
        set(t.ngram_max);
      else if (key == "buckets")
        set(t.buckets);
      else if (key == "word_ngrams")
        set(t.word_ngrams);  // absent before ordered words: 2
      else if (key == "spm_type")
        t.spm_type = data::kSpmTypeNames.parse(json_read::as<std::string>(value, at), "tokenizer: spm_type");
      else if (key == "vocab_size")
        set(t.spm_vocab_size);
      else if (key == "model_file") {
        check(is_string_equal(value, kTokenizerModelFile), "tokenizer: model_file must be '", kTokenizerModelFile,
              "', got ", value.dump());
      } else if (key == "model_fnv1a64") {
        check(value.is_string(), "tokenizer: model_fnv1a64 must be a string, got ", value.dump());
      } else
        fail("tokenizer: unknown key '", key, "'");
    }
    check(j.contains("type"), "tokenizer: missing field 'type'");
    t.validate();
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": tokenizer: a field has the wrong type (", e.what(), ")");
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  return t;
}

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
nlohmann::json architecture_fields(const ModelConfig& m) {
  const nn::ClassifierConfig& c = m.classifier;
  nlohmann::json j = {
      {"hidden_act", "gelu"},  // exact: x * Phi(x) with erf, not the tanh approximation
      {"layer_norm_eps", shortest_decimal(nn::LayerNorm::kDefaultEps)},
      {"norm_first", true},        // pre-LN layers: x + attn(ln1(x)), then h + ff(ln2(h))
      {"final_layer_norm", true},  // one more LayerNorm after the last layer, before pooling
      // learned, one row per position 0..max_len-1; "none" for bags of hashed n-grams
      {"position_embedding_type", c.position_embedding == nn::PositionEmbedding::kLearned ? "absolute" : "none"},
      {"attention_scale", "1/sqrt(head_dim)"},
      {"pooling_mask", "attention_mask"},            // mean pooling averages the real tokens only
      {"pad_token_id", data::ByteTokenizer::kPad}};  // 0 in every tokenizer
  // Prepended; the last id of every tokenizer's vocabulary (256 for bytes, buckets + 1 hashed).
  if (c.pooling == nn::Pooling::kCls) j["cls_token_id"] = m.tokenizer.model_vocab(true) - 1;
  return j;
}

}  // namespace

void check_model_config(const ModelConfig& m, const std::string& source, bool tokenizer_given) {
  const nn::ClassifierConfig& c = m.classifier;
  using Caps = ArchitectureCaps;
  for (const auto& [field, value, cap] :
       {std::tuple{"num_hidden_layers", c.layers, Caps::kLayers},
        std::tuple{"num_attention_heads", c.heads, Caps::kHeads}, std::tuple{"hidden_size", c.d_model, Caps::kDModel},
        std::tuple{"intermediate_size", c.d_ff, Caps::kDFf},
        std::tuple{"max_position_embeddings", c.max_len, Caps::kMaxLen},
        std::tuple{"vocab_size", c.vocab, Caps::kVocab}}) {
    check(value <= cap, source, ": ", field, " ", value, " is above the limit ", cap,
          " (the largest halfgrad train builds; docs/robustness.md)");
  }
  try {
    c.validate();
    m.tokenizer.validate();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  const int64_t needed = m.tokenizer.model_vocab(c.pooling == nn::Pooling::kCls);
  check(needed == c.vocab, source, ": vocab_size ", c.vocab, " disagrees with the ",
        data::kTokenizerKindNames.name(m.tokenizer.kind), " tokenizer",
        tokenizer_given ? "" : " (config.json has no \"tokenizer\" entry, which means bytes)", ", whose vocabulary is ",
        needed,
        m.tokenizer.kind == data::TokenizerKind::kCharNgrams || m.tokenizer.kind == data::TokenizerKind::kWords
            ? " (buckets + 1)"
            : "",
        c.pooling == nn::Pooling::kCls ? " with the CLS token" : "",
        ": the config was edited or belongs to other weights");
}

void check_config_matches_weights(const ModelConfig& m, const nn::StateDict& weights, const std::string& file) {
  const nn::ClassifierConfig& c = m.classifier;
  auto expect = [&](const std::string& name, std::vector<int64_t> dims, const char* fields) {
    const auto it = weights.find(name);
    check(it != weights.end(), file, ": missing tensor '", name, "' (config.json: ", fields, ")");
    const Shape expected{std::span<const int64_t>(dims)};
    check(it->second.shape() == expected, file, ": tensor '", name, "' has shape ", it->second.shape(),
          " but config.json's ", fields, " say ", expected);
  };
  expect("token_embedding.weight", {c.vocab, c.d_model}, "vocab_size, hidden_size");
  expect("head.weight", {c.classes, c.d_model}, "num_labels, hidden_size");
  if (c.position_embedding == nn::PositionEmbedding::kLearned) {
    expect("position_embedding.weight", {c.max_len, c.d_model}, "max_position_embeddings, hidden_size");
  }
  if (c.bag_skip) expect("bag_norm.weight", {c.d_model}, "bag_skip, hidden_size");
  if (c.layers > 0) {
    expect("encoder.layers." + std::to_string(c.layers - 1) + ".ff.fc1.weight", {c.d_ff, c.d_model},
           "num_hidden_layers, intermediate_size, hidden_size");
  }
  const std::string past = "encoder.layers." + std::to_string(c.layers) + ".";
  for (const auto& [name, tensor] : weights) {
    check(name.rfind(past, 0) != 0, file, ": tensor '", name,
          "' belongs to a layer past config.json's num_hidden_layers ", c.layers);
  }
}

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
                      {"position_embedding", nn::to_string(c.position_embedding)},
                      {"sparse_embedding", c.sparse_embedding},
                      {"bag_skip", c.bag_skip},
                      {"encoder_drop_path", c.encoder_drop_path},
                      {"tokenizer", tokenizer_config_to_json(m.tokenizer)},
                      {"id2label", id2label}};
  j.update(architecture_fields(m));
  return j;
}

ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source) {
  check(j.is_object(), source, ": expected a JSON object");
  // Type first, not j.value(): that throws a bare type_error for a non-string model_type. (Not
  // json == "...": GCC 12 -O3 reports a false -Warray-bounds inside nlohmann's operator== there.)
  const auto model_type = j.find("model_type");
  check(model_type != j.end() && model_type->is_string() &&
            model_type->get_ref<const std::string&>() == "halfgrad-text-classifier",
        source, ": model_type is not 'halfgrad-text-classifier' (a config of a different model)");
  auto get = [&](const char* key) -> const nlohmann::json& {
    check(j.contains(key), source, ": missing field '", key, "'");
    return j.at(key);
  };
  // A field into `field`, typed by it (json_read: a vocab_size of 1e87 is an error, not a cast);
  // read_optional: absent in older config.json files.
  auto read = [&](const char* key, auto& field) { json_read::read_field(j, source, key, field); };
  auto read_optional = [&](const char* key, auto& field) { json_read::read_optional_field(j, source, key, field); };
  ModelConfig m;
  try {
    nn::ClassifierConfig& c = m.classifier;
    read("vocab_size", c.vocab);
    read("max_position_embeddings", c.max_len);
    read("hidden_size", c.d_model);
    read("num_attention_heads", c.heads);
    read("intermediate_size", c.d_ff);
    read("num_hidden_layers", c.layers);
    read("num_labels", c.classes);
    read("dropout", c.dropout);
    std::string pooling;
    read("pooling", pooling);
    check(pooling == "mean" || pooling == "cls", source, ": pooling must be mean or cls, got '", pooling, "'");
    c.pooling = pooling == "mean" ? nn::Pooling::kMean : nn::Pooling::kCls;
    read("initializer_range", c.init_std);
    std::string position = "learned";  // absent before bag models
    read_optional("position_embedding", position);
    c.position_embedding = nn::parse_position_embedding(position, source + ": position_embedding");
    read_optional("sparse_embedding", c.sparse_embedding);  // absent before sparse gradients
    read_optional("bag_skip", c.bag_skip);                  // absent before bag_skip
    read_optional("encoder_drop_path", c.encoder_drop_path);
    if (j.contains("tokenizer")) m.tokenizer = tokenizer_config_from_json(j.at("tokenizer"), source);
    const nlohmann::json& id2label = get("id2label");
    for (int64_t i = 0; i < c.classes; ++i) {
      check(id2label.contains(std::to_string(i)), source, ": id2label has no entry for class ", i);
      m.labels.push_back(id2label.at(std::to_string(i)));
    }
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": a field has the wrong type (", e.what(), ")");
  }
  check_model_config(m, source, j.contains("tokenizer"));
  const nlohmann::json architecture = architecture_fields(m);
  for (const auto& [key, value] : architecture.items()) {  // absent in config.json files before them
    check(!j.contains(key) || j.at(key).dump() == value.dump(), source, ": ", key, " is ",
          j.contains(key) ? j.at(key).dump() : "", ", but halfgrad builds ", value.dump());
  }
  return m;
}

ModelConfig model_config_from_checkpoint(const Checkpoint& c, const std::string& dir) {
  ModelConfig m = model_config_from_json(c.config, dir + "/config.json");
  if (m.tokenizer.kind != data::TokenizerKind::kSentencePiece) return m;
  const std::string file = dir + "/" + kTokenizerModelFile;
  check(!c.tokenizer_model.empty(), dir, ": config.json names a sentencepiece tokenizer, but ", kTokenizerModelFile,
        " is missing from the checkpoint");
  const nlohmann::json& t = c.config.at("tokenizer");
  check(t.contains("model_fnv1a64"), dir, "/config.json: tokenizer: missing field 'model_fnv1a64'");
  const std::string actual = spm_model_fingerprint(c.tokenizer_model);
  check(is_string_equal(t.at("model_fnv1a64"), actual), file, ": fingerprint ", actual, ", but config.json records ",
        t.at("model_fnv1a64").dump(), " (corrupt or replaced)");
  const int64_t vocab_size = m.tokenizer.spm_vocab_size;
  m.tokenizer.set_spm_model(c.tokenizer_model, file);
  check(m.tokenizer.spm_vocab_size == vocab_size, file, ": ", m.tokenizer.spm_vocab_size,
        " pieces, but config.json says vocab_size ", vocab_size);
  return m;
}

}  // namespace hg::io
