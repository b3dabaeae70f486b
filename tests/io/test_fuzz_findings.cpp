// The fuzz targets' committed corpora, replayed (the command line's: test_halfgrad_cli.cpp), and
// the inputs the targets (fuzz/) found to break a reader, kept as regular tests after the fix.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "fuzz/checkpoint_json.h"
#include "fuzz/safetensors_reader.h"
#include "fuzz/tsv_reader.h"
#include "tests/fuzz_corpus.h"
#include "tests/temp_dir.h"
#include "halfgrad/io/model_config.h"
#include "halfgrad/io/safetensors.h"
#include "halfgrad/train/trainer.h"
#include "halfgrad/train/training_arguments.h"

namespace hg::io {
namespace {

TEST_CASE("fuzz corpus: tsv_reader replays cleanly", "[fuzz][data]") {
  CHECK(testing::replay_fuzz_corpus("tsv_reader", fuzz::tsv_reader) > 0);
}

TEST_CASE("fuzz corpus: safetensors_reader replays cleanly", "[fuzz][io]") {
  CHECK(testing::replay_fuzz_corpus("safetensors_reader", fuzz::safetensors_reader) > 0);
}

TEST_CASE("fuzz corpus: checkpoint_json replays cleanly", "[fuzz][train]") {
  CHECK(testing::replay_fuzz_corpus("checkpoint_json", fuzz::checkpoint_json) > 0);
}

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

TEST_CASE("fuzz finding: a float where trainer_state.json has an integer is an error", "[train][fuzz]") {
  // fuzz_checkpoint_json (fuzz/corpus/checkpoint_json/trainer_state_huge_float_step): a
  // skipped_steps of 5.5e100. nlohmann's get<int64_t>() casts a JSON float to the integer type,
  // undefined behaviour out of its range (UBSan: "5.55556e+100 is outside the range of
  // representable values of type 'long'"), and 2.5 would have read as 2. Every integer field of
  // the files a checkpoint is read back from goes through json_read::as now.
  nlohmann::json state = train::TrainerState{.global_step = 20, .max_steps = 40}.to_json();
  state["skipped_steps"] = 5.5e100;
  CHECK(testing::error_of([&] { train::TrainerState::from_json(state, "ck/trainer_state.json"); }) ==
        "ck/trainer_state.json: key 'skipped_steps' has the wrong type (5.5e+100, expected an integer)");
  state["skipped_steps"] = 2.5;
  CHECK(testing::error_of([&] { train::TrainerState::from_json(state, "ck/trainer_state.json"); }) ==
        "ck/trainer_state.json: key 'skipped_steps' has the wrong type (2.5, expected an integer)");
  nlohmann::json args = train::TrainingArguments{}.to_json();
  args["per_device_train_batch_size"] = 1e30;
  CHECK(testing::error_of([&] { train::TrainingArguments::from_json(args, "ck/trainer_state.json"); }) ==
        "ck/trainer_state.json: training_args: key 'per_device_train_batch_size' has the wrong type (1e+30, expected "
        "an integer)");
  args["per_device_train_batch_size"] = 64;
  args["learning_rate"] = 1e300;  // beyond float's range
  CHECK(testing::error_of([&] { train::TrainingArguments::from_json(args, "ck/trainer_state.json"); }) ==
        "ck/trainer_state.json: training_args: key 'learning_rate' is out of range (1e+300)");
}

TEST_CASE("fuzz finding: a config.json size too large for an integer is an error", "[train][fuzz]") {
  // fuzz_checkpoint_json (fuzz/corpus/checkpoint_json/config_huge_vocab_size): a vocab_size of
  // 2666...658 (88 digits), which nlohmann reads as a float (no integer type holds it), then cast
  // to int64_t. The sizes of config.json go through json_read::as too.
  nlohmann::json j = nlohmann::json::parse(
      R"({"model_type": "halfgrad-text-classifier", "vocab_size": 2666666666666666666666666666666666666666666666666666666666666666666666666666666666666658,
          "max_position_embeddings": 32, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32,
          "num_hidden_layers": 1, "num_labels": 2, "dropout": 0.1, "pooling": "mean", "initializer_range": 0.02,
          "id2label": {"0": "en", "1": "de"}})");
  CHECK(testing::error_of([&] { model_config_from_json(j, "ck/config.json"); }) ==
        "ck/config.json: key 'vocab_size' has the wrong type (2.6666666666666667e+87, expected an integer)");
  j["vocab_size"] = 256;
  CHECK(model_config_from_json(j, "ck/config.json").classifier.vocab == 256);
}

}  // namespace
}  // namespace hg::io
