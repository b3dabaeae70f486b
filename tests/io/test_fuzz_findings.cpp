// Inputs the fuzz targets (fuzz/) found to break a reader, kept as regular tests after the fix.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/temp_dir.h"
#include "halfgrad/io/model_config.h"
#include "halfgrad/io/safetensors.h"

namespace hg::io {
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

TEST_CASE("fuzz finding: a safetensors file holding a zero-element tensor loads", "[train][fuzz]") {
  // fuzz_safetensors_reader (issue #14; fuzz/corpus/safetensors_reader/empty_tensor_finding):
  // "e" has shape [0, 4] and no bytes. Reading its values copied zero bytes into the null
  // pointer of an empty std::vector, which UBSan reports (memcpy's arguments must be valid
  // pointers even for n = 0). Zero-element tensors are valid safetensors: it must load.
  const std::string header =
      R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"F32","shape":[0,4],"data_offsets":[4,4]}}    )";
  REQUIRE(header.size() == 0x70);  // the length the file's first 8 bytes state
  std::string bytes{'\x70', 0, 0, 0, 0, 0, 0, 0};
  bytes += header;
  bytes += std::string{0, 0, 0, '\x3f'};  // 0.5f, little-endian
  const testing::TempDir dir("fuzz_empty_tensor");
  testing::write_bytes(dir / "m.safetensors", bytes);
  const SafetensorsFile f = load_safetensors(dir / "m.safetensors");
  REQUIRE(f.tensors.size() == 2);
  const Tensor& e = f.tensors.at("e");
  CHECK(e.shape() == Shape{0, 4});
  CHECK(e.to_vector().empty());
  CHECK(f.tensors.at("s").item() == 0.5f);
}

}  // namespace
}  // namespace hg::io
