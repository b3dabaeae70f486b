// config.json: the tokenizer and the position-embedding choice round-trip, configs written
// before they existed read as bytes with learned positions, and a bad tokenizer is an error
// naming the file and the field.
#include <catch2/catch.hpp>

#include "autograd/error.h"
#include "train/model_config.h"
#include "train/training_arguments.h"

namespace hg::train {

namespace {

ModelConfig bag_config() {
  ModelConfig m;
  m.classifier = {.vocab = 4097, .max_len = 64, .d_model = 16, .heads = 2, .d_ff = 32, .layers = 0, .classes = 3,
                  .position_embedding = nn::PositionEmbedding::kNone};
  m.labels = {"de", "en", "fr"};
  m.tokenizer = {.kind = data::TokenizerKind::kCharNgrams, .ngram_min = 2, .ngram_max = 4, .buckets = 4096};
  return m;
}

}  // namespace

TEST_CASE("config.json round-trips the tokenizer and the position embedding", "[train][config]") {
  const nlohmann::json j = model_config_to_json(bag_config());
  CHECK(j.at("tokenizer") == nlohmann::json{{"type", "char-ngrams"}, {"ngram_min", 2}, {"ngram_max", 4}, {"buckets", 4096}});
  CHECK(j.at("position_embedding") == "none");
  const ModelConfig back = model_config_from_json(j, "config.json");
  CHECK(back.tokenizer == bag_config().tokenizer);
  CHECK(back.classifier.position_embedding == nn::PositionEmbedding::kNone);
  CHECK(back.classifier.layers == 0);
  CHECK(back.labels == bag_config().labels);

  ModelConfig words = bag_config();
  words.tokenizer = {.kind = data::TokenizerKind::kWords, .buckets = 4096};
  CHECK(model_config_to_json(words).at("tokenizer") == nlohmann::json{{"type", "words"}, {"buckets", 4096}});
  CHECK(model_config_from_json(model_config_to_json(words), "c").tokenizer == words.tokenizer);

  TrainingArguments a;
  a.tokenizer = bag_config().tokenizer;
  CHECK(TrainingArguments::from_json(a.to_json(), "trainer_state.json").tokenizer == a.tokenizer);
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

  nlohmann::json args = TrainingArguments().to_json();
  args.erase("tokenizer");
  CHECK(TrainingArguments::from_json(args, "trainer_state.json").tokenizer.kind == data::TokenizerKind::kBytes);
}

TEST_CASE("a bad tokenizer in config.json names the file and the field", "[train][config]") {
  auto with = [](nlohmann::json tokenizer) {
    nlohmann::json j = model_config_to_json(bag_config());
    j["tokenizer"] = std::move(tokenizer);
    return j;
  };
  using Catch::Contains;
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "chars"}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: unknown type 'chars'"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"buckets", 10}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: missing field 'type'"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "words"}, {"size", 10}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: unknown key 'size'"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "words"}, {"buckets", "many"}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: a field has the wrong type"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "words"}, {"buckets", 1e30}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: a field has the wrong type"));
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", 7}}), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: a field has the wrong type"));
  REQUIRE_THROWS_WITH(
      model_config_from_json(with({{"type", "char-ngrams"}, {"ngram_min", 4}, {"ngram_max", 2}}), "ck/config.json"),
      Contains("ck/config.json: tokenizer: need 1 <= ngram_min <= ngram_max"));
  REQUIRE_THROWS_WITH(model_config_from_json(with("words"), "ck/config.json"),
                      Contains("ck/config.json: tokenizer: expected an object"));
  // 2^16 buckets need 65537 embedding rows; the model has 4097.
  REQUIRE_THROWS_WITH(model_config_from_json(with({{"type", "words"}, {"buckets", 65536}}), "ck/config.json"),
                      Contains("ck/config.json: the words tokenizer needs vocab_size 65537, the model has 4097"));
  nlohmann::json j = model_config_to_json(bag_config());
  j["position_embedding"] = "rotary";
  REQUIRE_THROWS_WITH(model_config_from_json(j, "ck/config.json"),
                      Contains("ck/config.json: position_embedding must be learned or none, got 'rotary'"));
}

}  // namespace hg::train
