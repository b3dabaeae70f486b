// Inputs the fuzz targets (fuzz/) found to break a reader, kept as regular tests after the fix.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/train/temp_dir.h"
#include "train/model_config.h"

namespace hg::train {
namespace {

TEST_CASE("fuzz finding: config.json whose model_type is not a string", "[train][fuzz]") {
  // fuzz_checkpoint_json: {"model_type": 7, ...} escaped as nlohmann's type_error 302 ("type
  // must be string, but is number") from j.value("model_type", ""), naming no file.
  const nlohmann::json j = nlohmann::json::parse(
      R"({"model_type": 7, "max_position_embeddings": 32, "hidden_size": 16, "num_attentio~_heads": 3,
          "intel": {"0": "en", "1": "de"}})");
  CHECK(testing::error_of([&] { model_config_from_json(j, "ckpt/config.json"); }) ==
        "ckpt/config.json: model_type is not 'halfgrad-text-classifier' (a config of a different model)");
}

}  // namespace
}  // namespace hg::train
