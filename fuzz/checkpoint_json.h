// Fuzzes the JSON readers of a checkpoint directory: config.json (io::model_config_from_json)
// and trainer_state.json (train::TrainerState::from_json, and TrainingArguments::from_json of
// its "training_args"). Input that parses as JSON must either be accepted or rejected with an
// hg::Error naming the file; a nlohmann exception escaping (a bare "key not found" message)
// aborts. The first byte chooses the reader.
// libFuzzer runs it from fuzz/checkpoint_json.cpp; the tests replay its committed corpus
// fuzz/corpus/checkpoint_json/ (tests/fuzz_corpus.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "halfgrad/base/error.h"
#include "halfgrad/io/model_config.h"
#include "halfgrad/train/trainer.h"

namespace hg::fuzz {

inline int checkpoint_json(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const nlohmann::json j = nlohmann::json::parse(data + 1, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // not JSON: the reader's read_json reports that before these run
  try {
    if (data[0] & 1) {
      const hg::io::ModelConfig m = hg::io::model_config_from_json(j, "config.json");
      if (int64_t(m.labels.size()) != m.classifier.classes) std::abort();
    } else {
      (void)hg::train::TrainerState::from_json(j, "trainer_state.json");
      if (j.is_object() && j.contains("training_args")) {  // read by Trainer::restore
        (void)hg::train::TrainingArguments::from_json(j["training_args"], "trainer_state.json");
      }
    }
  } catch (const hg::Error&) {
  }
  return 0;
}

}  // namespace hg::fuzz
