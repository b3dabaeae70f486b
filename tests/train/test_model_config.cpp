// config.json (train/model_config.h): the fields a re-implementation reads, the round trip, and
// config files written before those fields existed.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/train/temp_dir.h"
#include "train/model_config.h"

namespace hg::train {
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

}  // namespace
}  // namespace hg::train
