// config.json (halfgrad/io/model_config.h): the fields a re-implementation reads, the round trip of
// the model, its tokenizer and position-embedding choice, config files written before those
// fields existed (bytes, learned positions), errors naming the file and the field, and a
// sentencepiece model carried in the checkpoint beside config.json; json_read::as, the typed read
// under every JSON reader (halfgrad/autograd/json_read.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/json_read.h"
#include "halfgrad/base/error.h"
#include "halfgrad/data/sentencepiece.h"
#include "halfgrad/io/model_config.h"
#include "tests/temp_dir.h"
#include "halfgrad/train/training_arguments.h"

namespace hg::io {
namespace {

ModelConfig cls_config() {
  ModelConfig m;
  m.classifier.vocab = 257;
  m.classifier.max_len = 24;
  m.classifier.d_model = 16;
  m.classifier.heads = 4;
  m.classifier.d_ff = 48;
  m.classifier.layers = 3;
  m.classifier.classes = 3;
  m.classifier.pooling = nn::Pooling::kCls;
  m.labels = {"de", "en", "fr"};
  return m;
}

ModelConfig bag_config() {
  ModelConfig m;
  m.classifier = {.vocab = 4097,
                  .max_len = 64,
                  .d_model = 16,
                  .heads = 2,
                  .d_ff = 32,
                  .layers = 0,
                  .classes = 3,
                  .position_embedding = nn::PositionEmbedding::kNone,
                  .sparse_embedding = true};
  m.labels = {"de", "en", "fr"};
  m.tokenizer = {.kind = data::TokenizerKind::kCharNgrams, .ngram_min = 2, .ngram_max = 4, .buckets = 4096};
  return m;
}

// The error json_read::as<T> throws for `v`, read as key 'k' of f.json.
template <class T>
std::string json_read_error(const nlohmann::json& v) {
  return testing::error_of([&] { (void)json_read::as<T>(v, "f.json: key 'k'"); });
}

}  // namespace

TEST_CASE("config.json names the architecture with Hugging Face's fields", "[train][config]") {
  const nlohmann::json j = model_config_to_json(cls_config());
  CHECK(j.at("hidden_size") == 16);
  CHECK(j.at("num_attention_heads") == 4);
  CHECK(j.at("num_hidden_layers") == 3);
  CHECK(j.at("intermediate_size") == 48);
  CHECK(j.at("max_position_embeddings") == 24);
  CHECK(j.at("vocab_size") == 257);
  CHECK(j.at("hidden_act") == "gelu");
  CHECK(j.at("layer_norm_eps").get<double>() == 1e-5);  // the decimal, not 1e-5f widened
  CHECK(j.at("norm_first") == true);
  CHECK(j.at("final_layer_norm") == true);
  CHECK(j.at("position_embedding_type") == "absolute");
  CHECK(j.at("pad_token_id") == 0);
  CHECK(j.at("cls_token_id") == 256);
  CHECK(j.at("pooling") == "cls");

  ModelConfig mean = cls_config();
  mean.classifier.vocab = 256;
  mean.classifier.pooling = nn::Pooling::kMean;
  CHECK_FALSE(model_config_to_json(mean).contains("cls_token_id"));  // no CLS token is prepended
  CHECK(model_config_to_json(mean).at("pooling_mask") == "attention_mask");
}

TEST_CASE("config.json round-trips and loads without the descriptive fields but refuses another architecture",
          "[train][config]") {
  const ModelConfig m = cls_config();
  nlohmann::json j = model_config_to_json(m);
  const ModelConfig back = model_config_from_json(j, "config.json");
  CHECK(back.labels == m.labels);
  CHECK(back.classifier.d_model == 16);
  CHECK(back.classifier.heads == 4);
  CHECK(back.classifier.pooling == nn::Pooling::kCls);
  CHECK(back.classifier.vocab == 257);

  // A config.json from before these fields: they describe, the model is rebuilt without them.
  nlohmann::json old = j;
  for (const char* key : {"hidden_act", "layer_norm_eps", "norm_first", "final_layer_norm", "position_embedding_type",
                          "attention_scale", "pooling_mask", "pad_token_id", "cls_token_id"}) {
    REQUIRE(old.erase(key) == 1);
  }
  CHECK(model_config_from_json(old, "old/config.json").classifier.layers == 3);

  j["hidden_act"] = "relu";
  CHECK(testing::error_of([&] { model_config_from_json(j, "ckpt/config.json"); }) ==
        "ckpt/config.json: hidden_act is \"relu\", but halfgrad builds \"gelu\"");
  j["hidden_act"] = "gelu";
  j["norm_first"] = false;
  CHECK_THAT(testing::error_of([&] { model_config_from_json(j, "ckpt/config.json"); }),
             Catch::Contains("norm_first is false, but halfgrad builds true"));
}

TEST_CASE("fit_to_tokenizer sets vocab (with the CLS id under cls pooling) and sparse rows for hashed tokenizers",
          "[train][config]") {
  nn::ClassifierConfig c;
  fit_to_tokenizer(c, bag_config().tokenizer);  // 4096 buckets, mean pooling
  CHECK(c.vocab == 4097);
  CHECK(c.sparse_embedding);
  c.pooling = nn::Pooling::kCls;
  fit_to_tokenizer(c, data::TokenizerConfig{});  // bytes
  CHECK(c.vocab == 257);                         // 256 bytes (0 doubles as padding) and CLS
  CHECK_FALSE(c.sparse_embedding);
  fit_to_tokenizer(c, {.kind = data::TokenizerKind::kWords, .buckets = 100});
  CHECK(c.vocab == 102);
  CHECK(c.sparse_embedding);
}

TEST_CASE("config.json round-trips the tokenizer and the position embedding", "[train][config]") {
  const nlohmann::json j = model_config_to_json(bag_config());
  CHECK(j.at("tokenizer") ==
        nlohmann::json{{"type", "char-ngrams"}, {"ngram_min", 2}, {"ngram_max", 4}, {"buckets", 4096}});
  CHECK(j.at("position_embedding") == "none");
  CHECK(j.at("position_embedding_type") == "none");  // the field a re-implementation reads
  const ModelConfig back = model_config_from_json(j, "config.json");
  CHECK(back.tokenizer == bag_config().tokenizer);
  CHECK(back.classifier.position_embedding == nn::PositionEmbedding::kNone);
  CHECK(back.classifier.sparse_embedding);
  CHECK(back.classifier.layers == 0);
  CHECK(back.labels == bag_config().labels);

  ModelConfig words = bag_config();
  words.tokenizer = {.kind = data::TokenizerKind::kWords, .buckets = 4096};
  CHECK(model_config_to_json(words).at("tokenizer") == nlohmann::json{{"type", "words"}, {"buckets", 4096}});
  CHECK(model_config_from_json(model_config_to_json(words), "c").tokenizer == words.tokenizer);

  words.tokenizer.word_ngrams = 1;  // ordered words: written, since it is not the default 2
  CHECK(model_config_to_json(words).at("tokenizer") ==
        nlohmann::json{{"type", "words"}, {"buckets", 4096}, {"word_ngrams", 1}});
  CHECK(model_config_from_json(model_config_to_json(words), "c").tokenizer == words.tokenizer);

  train::TrainingArguments a;
  a.tokenizer = bag_config().tokenizer;
  CHECK(train::TrainingArguments::from_json(a.to_json(), "trainer_state.json").tokenizer == a.tokenizer);
}

TEST_CASE(
    "config.json round-trips bag_skip and encoder_drop_path, reads their absence as off and refuses them "
    "without layers or the bag",
    "[train][config]") {
  ModelConfig m = cls_config();
  nlohmann::json j = model_config_to_json(m);
  CHECK(j.at("bag_skip") == false);
  CHECK(j.at("encoder_drop_path") == 0.0f);
  j.erase("bag_skip");  // a config.json from before bag_skip
  j.erase("encoder_drop_path");
  CHECK_FALSE(model_config_from_json(j, "old/config.json").classifier.bag_skip);
  CHECK(model_config_from_json(j, "old/config.json").classifier.encoder_drop_path == 0.0f);
  m.classifier.bag_skip = true;
  m.classifier.encoder_drop_path = 0.75f;
  j = model_config_to_json(m);
  CHECK(j.at("bag_skip") == true);
  CHECK(model_config_from_json(j, "config.json").classifier.bag_skip);
  CHECK(model_config_from_json(j, "config.json").classifier.encoder_drop_path == 0.75f);
  j["bag_skip"] = false;
  CHECK_THROWS_WITH(model_config_from_json(j, "ck/config.json"),
                    Catch::Contains("ck/config.json: config: encoder_drop_path needs bag_skip"));
  nlohmann::json bag = model_config_to_json(bag_config());
  bag["bag_skip"] = true;
  CHECK_THROWS_WITH(model_config_from_json(bag, "ck/config.json"),
                    Catch::Contains("ck/config.json: config: bag_skip needs layers >= 1"));
}

TEST_CASE("training_args write the token table's group and label smoothing only when set, and read them back",
          "[train][config]") {
  train::TrainingArguments a;
  nlohmann::json j = a.to_json();
  for (const char* key : {"embedding_learning_rate", "label_smoothing_factor"}) {
    CHECK_FALSE(j.contains(key));
  }
  a.embedding_learning_rate = 3e-4f;
  a.label_smoothing_factor = 0.1f;
  j = a.to_json();
  const train::TrainingArguments back = train::TrainingArguments::from_json(j, "trainer_state.json");
  CHECK(back.embedding_learning_rate == 3e-4f);
  CHECK(back.label_smoothing_factor == 0.1f);
  j["label_smoothing_factor"] = "lots";
  CHECK_THROWS_WITH(train::TrainingArguments::from_json(j, "trainer_state.json"),
                    Catch::Contains("key 'label_smoothing_factor' has the wrong type"));
}

TEST_CASE("config.json from before tokenizers reads as bytes with learned positions", "[train][config]") {
  ModelConfig old;
  old.classifier = {.vocab = 256, .max_len = 32, .d_model = 16, .heads = 2, .d_ff = 32, .layers = 1, .classes = 2};
  old.labels = {"a", "b"};
  nlohmann::json j = model_config_to_json(old);
  j.erase("position_embedding");
  j["tokenizer"] = "bytes";  // what every earlier version wrote
  ModelConfig back = model_config_from_json(j, "config.json");
  CHECK(back.tokenizer == data::TokenizerConfig{});
  CHECK(back.tokenizer.kind == data::TokenizerKind::kBytes);
  CHECK(back.classifier.position_embedding == nn::PositionEmbedding::kLearned);
  j.erase("tokenizer");
  CHECK(model_config_from_json(j, "config.json").tokenizer.kind == data::TokenizerKind::kBytes);

  nlohmann::json args = train::TrainingArguments().to_json();
  args.erase("tokenizer");
  CHECK(train::TrainingArguments::from_json(args, "trainer_state.json").tokenizer.kind == data::TokenizerKind::kBytes);
}

TEST_CASE("training_args hold the mixed-precision mode under Hugging Face's keys, and old ones still load",
          "[train][config]") {
  train::TrainingArguments a;
  a.mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2};
  const nlohmann::json j = a.to_json();
  CHECK(j.at("fp16") == true);  // flat, as HF's TrainingArguments.to_dict()
  CHECK(j.at("bf16") == false);
  CHECK(j.at("fp16_opt_level") == "O2");
  CHECK(j.at("normalization_outputs") == "input_dtype");
  CHECK(train::TrainingArguments::from_json(j, "trainer_state.json").mixed_precision == a.mixed_precision.resolved());

  // The keys the code before MixedPrecisionOptions wrote (an fp16 O1 run with a static scale).
  nlohmann::json old = train::TrainingArguments().to_json();
  for (const char* key : {"pure_fp16", "normalization_outputs"}) old.erase(key);
  old["fp16"] = true;
  old["fp16_opt_level"] = "O1";
  old["loss_scale"] = "1024";
  const optim::MixedPrecisionOptions back =
      train::TrainingArguments::from_json(old, "trainer_state.json").mixed_precision;
  CHECK(back.precision == optim::Precision::kFp16);
  CHECK(back.opt_level == optim::OptLevel::kO1);
  CHECK(back.loss_scaling == optim::LossScaling{optim::LossScaling::Kind::kStatic, 1024.0f});
  CHECK(back.resolved().normalization_outputs == NormalizationOutputs::kFloat32);  // O1's, as before
  old["bf16"] = true;
  CHECK_THROWS_WITH(train::TrainingArguments::from_json(old, "trainer_state.json"),
                    Catch::Contains("trainer_state.json: training_args: keys 'fp16' and 'bf16' are both true"));
}

TEST_CASE("training_args write the strategies and the scheduler by HF's names and name the key of a bad one",
          "[train][config]") {
  train::TrainingArguments a;
  a.eval_strategy = train::IntervalStrategy::kEpoch;
  a.save_strategy = train::IntervalStrategy::kNo;
  a.lr_scheduler_type = optim::Schedule::kCosine;
  nlohmann::json j = a.to_json();
  CHECK(j.at("eval_strategy") == "epoch");
  CHECK(j.at("save_strategy") == "no");
  CHECK(j.at("lr_scheduler_type") == "cosine");
  const train::TrainingArguments back = train::TrainingArguments::from_json(j, "t.json");
  CHECK(back.eval_strategy == a.eval_strategy);
  CHECK(back.save_strategy == a.save_strategy);
  CHECK(back.lr_scheduler_type == a.lr_scheduler_type);
  j.erase("eval_strategy");
  j["evaluation_strategy"] = "steps";  // HF's old name
  CHECK(train::TrainingArguments::from_json(j, "t.json").eval_strategy == train::IntervalStrategy::kSteps);
  j["save_strategy"] = "always";
  CHECK_THROWS_WITH(train::TrainingArguments::from_json(j, "t.json"),
                    "t.json: training_args: key 'save_strategy': unknown value 'always' (expected no, steps or epoch)");
  j["save_strategy"] = "no";
  j["lr_scheduler_type"] = "cosine_restarts";
  CHECK_THROWS_WITH(train::TrainingArguments::from_json(j, "t.json"),
                    "t.json: training_args: key 'lr_scheduler_type': unknown value 'cosine_restarts' (expected "
                    "constant, linear or cosine)");
}

TEST_CASE("a bad tokenizer in config.json names the file and the field", "[train][config]") {
  auto with = [](nlohmann::json tokenizer) {
    nlohmann::json j = model_config_to_json(bag_config());
    j["tokenizer"] = std::move(tokenizer);
    return j;
  };
  using Catch::Contains;
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "chars"}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: type: unknown value 'chars'"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"buckets", 10}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: missing field 'type'"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "words"}, {"size", 10}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: unknown key 'size'"));
  REQUIRE_THROWS_WITH(
      model_config_from_json(with({{"type", "words"}, {"buckets", "many"}}), "ck/config.json"),
      Contains("ck/config.json: tokenizer: key 'buckets' has the wrong type (\"many\", expected an integer)"));
  REQUIRE_THROWS_WITH(
      model_config_from_json(with({{"type", "words"}, {"buckets", 1e30}}), "ck/config.json"),
      Contains("ck/config.json: tokenizer: key 'buckets' has the wrong type (1e+30, expected an integer)"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", 7}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: key 'type' has the wrong type (7, expected a string)"));
  REQUIRE_THROWS_WITH(
      model_config_from_json(with({{"type", "char-ngrams"}, {"ngram_min", 4}, {"ngram_max", 2}}), "ck/config.json"),
      Contains("ck/config.json: tokenizer: need 1 <= ngram_min <= ngram_max"));
  REQUIRE_THROWS_WITH(model_config_from_json(with("words"), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: expected an object"));
  // 2^16 buckets need 65537 embedding rows; the model has 4097.
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "words"}, {"buckets", 65536}}), "ck/config.json"),
                      Contains("ck/config.json: vocab_size 4097 disagrees with the words tokenizer, whose vocabulary "
                               "is 65537 (buckets + 1)"));
  nlohmann::json j = model_config_to_json(bag_config());
  j["position_embedding"] = "rotary";
  REQUIRE_THROWS_WITH(model_config_from_json(j, "ck/config.json"),
                      Contains("ck/config.json: position_embedding must be learned or none, got 'rotary'"));
}

TEST_CASE("a sentencepiece model travels in the checkpoint, fingerprinted, and a missing or corrupt one is an error",
          "[train][config]") {
  std::vector<std::string> texts;
  for (int i = 0; i < 60; ++i) texts.push_back("der Hund " + std::to_string(i) + " le chien \xC3\xA9t\xC3\xA9 the dog");
  ModelConfig m = cls_config();
  m.tokenizer = {.kind = data::TokenizerKind::kSentencePiece, .spm_type = data::SpmType::kBpe, .spm_vocab_size = 40};
  m.tokenizer.train_spm_model(texts);
  m.classifier.vocab = m.tokenizer.model_vocab(true);  // 40 pieces + padding + CLS
  CHECK(m.classifier.vocab == 42);
  const nlohmann::json j = model_config_to_json(m);
  const nlohmann::json& t = j.at("tokenizer");
  CHECK(t.at("type") == "sentencepiece");
  CHECK(t.at("spm_type") == "bpe");
  CHECK(t.at("vocab_size") == 40);
  CHECK(t.at("model_file") == "sentencepiece.model");
  CHECK(t.at("model_fnv1a64").get<std::string>().size() == 16);
  CHECK(j.at("cls_token_id") == 41);

  const testing::TempDir dir("spm_checkpoint");
  Checkpoint c;
  c.config = j;
  c.tokenizer_model = m.tokenizer.spm_model;
  const std::string saved = save_checkpoint(dir.path, 5, c).string();
  const Checkpoint loaded = load_checkpoint(saved);
  CHECK(loaded.tokenizer_model == m.tokenizer.spm_model);
  const ModelConfig back = model_config_from_checkpoint(loaded, saved);
  CHECK(back.tokenizer == m.tokenizer);
  CHECK(data::Tokenizer(back.tokenizer).encode("der Hund", 16) == data::Tokenizer(m.tokenizer).encode("der Hund", 16));
  // config.json alone has no model.
  CHECK(model_config_from_json(j, "config.json").tokenizer.spm_model.empty());

  using Catch::Contains;
  Checkpoint corrupt = loaded;
  corrupt.tokenizer_model[corrupt.tokenizer_model.size() / 2] ^= 1;  // same size: the manifest cannot tell
  CHECK_THROWS_WITH(model_config_from_checkpoint(corrupt, "ck"),
                    Contains("ck/sentencepiece.model: fingerprint") && Contains("(corrupt or replaced)"));
  Checkpoint missing = loaded;
  missing.tokenizer_model.clear();
  CHECK_THROWS_WITH(model_config_from_checkpoint(missing, "ck"),
                    Contains("ck: config.json names a sentencepiece tokenizer, but sentencepiece.model is missing"));
  std::filesystem::remove(std::filesystem::path(saved) / "sentencepiece.model");
  CHECK_THROWS_WITH(load_checkpoint(saved), Contains("sentencepiece.model"));
  // Bytes that match their fingerprint but are no model are the library's error, naming the file.
  Checkpoint garbage = loaded;
  garbage.tokenizer_model = "not a model";
  garbage.config["tokenizer"]["model_fnv1a64"] = model_config_to_json([&] {
                                                   ModelConfig g = m;
                                                   g.tokenizer.spm_model = "not a model";
                                                   return g;
                                                 }())
                                                     .at("tokenizer")
                                                     .at("model_fnv1a64");
  CHECK_THROWS_WITH(model_config_from_checkpoint(garbage, "ck"), Contains("ck/sentencepiece.model: "));
}

TEST_CASE("one rule ties a config to itself: vocab_size, the tokenizer, architecture caps", "[train][config]") {
  using Catch::Contains;
  const nlohmann::json good = model_config_to_json(bag_config());  // char-ngrams, 4096 buckets, vocab 4097
  // Fewer buckets with vocab_size left alone: ids would land on other rows (this loaded before).
  nlohmann::json j = good;
  j["tokenizer"]["buckets"] = 2048;
  REQUIRE_THROWS_WITH(model_config_from_json(j, "ck/config.json"),
                      Contains("ck/config.json: vocab_size 4097 disagrees with the char-ngrams tokenizer, whose "
                               "vocabulary is 2049 (buckets + 1)"));
  // The tokenizer entry dropped: bytes, 256 ids, not the 4097 rows the weights have.
  j = good;
  j.erase("tokenizer");
  REQUIRE_THROWS_WITH(model_config_from_json(j, "ck/config.json"),
                      Contains("vocab_size 4097 disagrees with the bytes tokenizer (config.json has no \"tokenizer\" "
                               "entry, which means bytes), whose vocabulary is 256"));
  // The caps of the train flags, per field.
  for (const auto& [field, value, cap] :
       {std::tuple{"num_hidden_layers", int64_t{1} << 40, ArchitectureCaps::kLayers},
        std::tuple{"num_attention_heads", int64_t{512}, ArchitectureCaps::kHeads},
        std::tuple{"hidden_size", int64_t{16384}, ArchitectureCaps::kDModel},
        std::tuple{"intermediate_size", int64_t{1} << 20, ArchitectureCaps::kDFf},
        std::tuple{"max_position_embeddings", int64_t{8192}, ArchitectureCaps::kMaxLen}}) {
    j = good;
    j[field] = value;
    REQUIRE_THROWS_WITH(model_config_from_json(j, "ck/config.json"),
                        Contains(std::string("ck/config.json: ") + field + " " + std::to_string(value) +
                                 " is above the limit " + std::to_string(cap)));
  }
}

TEST_CASE("check_config_matches_weights compares the config with the tensors before a model is built",
          "[train][config]") {
  const ModelConfig m = bag_config();
  const nn::TextClassifier model(m.classifier, 0);
  nn::StateDict weights = model.state_dict();
  check_config_matches_weights(m, weights, "ck/model.safetensors");
  ModelConfig more = m;
  more.classifier.layers = 1;
  CHECK_THROWS_WITH(check_config_matches_weights(more, weights, "ck/model.safetensors"),
                    Catch::Contains("ck/model.safetensors: missing tensor 'encoder.layers.0.ff.fc1.weight'"));
  ModelConfig wider = m;
  wider.classifier.vocab = 8193;
  CHECK_THROWS_WITH(check_config_matches_weights(wider, weights, "ck/model.safetensors"),
                    Catch::Contains("tensor 'token_embedding.weight' has shape (4097, 16) but config.json's "
                                    "vocab_size, hidden_size say (8193, 16)"));
  ModelConfig skip = more;  // layers 1 with bag_skip: its bag_norm is named first
  skip.classifier.bag_skip = true;
  CHECK_THROWS_WITH(check_config_matches_weights(skip, weights, "ck/model.safetensors"),
                    Catch::Contains("ck/model.safetensors: missing tensor 'bag_norm.weight' (config.json: bag_skip"));
  weights["encoder.layers.0.ln1.weight"] = Tensor::zeros({16});
  CHECK_THROWS_WITH(check_config_matches_weights(m, weights, "ck/model.safetensors"),
                    Catch::Contains("tensor 'encoder.layers.0.ln1.weight' belongs to a layer past config.json's "
                                    "num_hidden_layers 0"));
}

TEST_CASE("json_read::as reads integers only from JSON integers in the field's range", "[json]") {
  CHECK(json_read::as<int64_t>(nlohmann::json(-7), "k") == -7);
  CHECK(json_read::as<int64_t>(nlohmann::json(std::numeric_limits<int64_t>::max()), "k") ==
        std::numeric_limits<int64_t>::max());
  CHECK(json_read::as<uint64_t>(nlohmann::json(std::numeric_limits<uint64_t>::max()), "k") ==
        std::numeric_limits<uint64_t>::max());
  CHECK(json_read::as<int32_t>(nlohmann::json(int64_t{-2147483648}), "k") == std::numeric_limits<int32_t>::min());
  CHECK(json_read_error<int64_t>(nlohmann::json(5.5e100)) ==
        "f.json: key 'k' has the wrong type (5.5e+100, expected an integer)");
  CHECK(json_read_error<int64_t>(nlohmann::json(40.0)) ==
        "f.json: key 'k' has the wrong type (40.0, expected an integer)");
  CHECK(json_read_error<int64_t>(nlohmann::json("40")) ==
        "f.json: key 'k' has the wrong type (\"40\", expected an integer)");
  // 2^63 is a JSON unsigned integer: one past int64_t's range.
  CHECK(json_read_error<int64_t>(nlohmann::json(uint64_t{1} << 63)) ==
        "f.json: key 'k' is out of range (9223372036854775808, expected -9223372036854775808 to 9223372036854775807)");
  CHECK(json_read_error<int32_t>(nlohmann::json(int64_t{1} << 31)) ==
        "f.json: key 'k' is out of range (2147483648, expected -2147483648 to 2147483647)");
  CHECK(json_read_error<size_t>(nlohmann::json(-1)) ==
        "f.json: key 'k' is out of range (-1, expected 0 to 18446744073709551615)");
}

TEST_CASE("json_read::as reads floats from finite JSON numbers the type can hold", "[json]") {
  CHECK(json_read::as<float>(nlohmann::json(0.5), "k") == 0.5f);
  CHECK(json_read::as<float>(nlohmann::json(3), "k") == 3.0f);  // an integer is a number
  CHECK(json_read::as<double>(nlohmann::json(1e300), "k") == 1e300);
  // FLT_MAX = 3.4028234663852886e38 reads; 1e39 is past it (and would be inf, not a learning rate).
  CHECK(json_read::as<float>(nlohmann::json(double(std::numeric_limits<float>::max())), "k") ==
        std::numeric_limits<float>::max());
  CHECK(json_read_error<float>(nlohmann::json(1e39)) == "f.json: key 'k' is out of range (1e+39)");
  CHECK(json_read_error<double>(nlohmann::json("0.5")) ==
        "f.json: key 'k' has the wrong type (\"0.5\", expected a number)");
}

TEST_CASE("json_read::as reads booleans and strings only from their JSON types", "[json]") {
  CHECK(json_read::as<bool>(nlohmann::json(true), "k"));
  CHECK(json_read::as<std::string>(nlohmann::json("out"), "k") == "out");
  CHECK(json_read_error<bool>(nlohmann::json(1)) == "f.json: key 'k' has the wrong type (1, expected true or false)");
  CHECK(json_read_error<std::string>(nlohmann::json(nullptr)) ==
        "f.json: key 'k' has the wrong type (null, expected a string)");
}

}  // namespace hg::io
