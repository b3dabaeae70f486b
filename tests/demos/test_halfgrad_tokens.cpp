// The `halfgrad` command with ordered tokens: --tokenizer sentencepiece (a model trained on
// --train or loaded with --spm-model, saved in the checkpoint and used by a resume, eval and
// predict; a missing model file is an error naming it) and --positions (learned by default for
// words and sentencepiece under encoder layers, where words drops its bigrams), on tiny f32 runs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kTinyOrdered =
    " --precision fp32 --d-model 8 --heads 2 --d-ff 16 --max-len 12 --batch-size 4"
    " --threads 1 --lr 1e-2";

testing::ProgramResult run_halfgrad(const std::string& args, int expected_code = 0) {
  testing::ProgramResult r = testing::run_program("halfgrad", args);
  INFO("halfgrad " << args << "\n" << r.output);
  REQUIRE(r.exit_code == expected_code);
  return r;
}

// 24 texts of two languages with accents, in a label<TAB>text file.
void write_words_tsv(const fs::path& file) {
  std::string tsv;
  for (int i = 0; i < 12; ++i) {
    tsv += "de\tder Hund l\xC3\xA4uft " + std::to_string(i) +
           " durch die Stra\xC3\x9F"
           "e\n";
    tsv += "fr\tle chien court " + std::to_string(i) + " dans la rue \xC3\xA9troite\n";
  }
  testing::write_bytes(file, tsv);
}

nlohmann::json config_of(const fs::path& checkpoint) {
  return nlohmann::json::parse(testing::read_bytes(checkpoint / "config.json"));
}

}  // namespace

TEST_CASE("halfgrad train --tokenizer sentencepiece: the model is in the checkpoint, resumed, evaluated and reloaded",
          "[demo][cli][sentencepiece]") {
  const TempDir dir("spm_command");
  write_words_tsv(dir.path / "train.tsv");
  const std::string flags = "train" + kTinyOrdered +
                            " --tokenizer sentencepiece --spm-type bpe --vocab-size 40 --layers 1" +
                            " --max-steps 4 --save-steps 2 --save-total-limit 5 --train " + dir / "train.tsv";
  const testing::ProgramResult whole = run_halfgrad(flags + " --output-dir " + dir / "whole");
  CHECK_THAT(whole.output, Catch::Contains("tokenizer: sentencepiece bpe model of 40 pieces trained on 24 texts"));
  CHECK_THAT(whole.output, Catch::Contains("tokenizer sentencepiece, positions learned"));
  const fs::path last = dir.path / "whole/checkpoint-4";
  REQUIRE(fs::exists(last / "sentencepiece.model"));
  const nlohmann::json config = config_of(last);
  CHECK(config.at("vocab_size") == 42);  // 40 pieces + padding + CLS (--layers 1 pools cls by default)
  CHECK(config.at("position_embedding") == "learned");
  CHECK(config.at("tokenizer").at("spm_type") == "bpe");
  CHECK(config.at("tokenizer").at("model_file") == "sentencepiece.model");
  const nlohmann::json manifest = nlohmann::json::parse(testing::read_bytes(last / "checkpoint.json"));
  CHECK(manifest.at("files").contains("sentencepiece.model"));

  // A resume from step 2 takes the checkpoint's model and ends with the same weights, bit for bit.
  run_halfgrad(flags + " --output-dir " + dir / "resumed" + " --resume " + dir / "whole/checkpoint-2");
  CHECK(testing::read_bytes(dir.path / "resumed/checkpoint-4/model.safetensors") ==
        testing::read_bytes(last / "model.safetensors"));
  // ... and refuses another vocabulary size, naming the flags.
  const testing::ProgramResult other =
      run_halfgrad("train" + kTinyOrdered + " --tokenizer sentencepiece --spm-type bpe --vocab-size 30 --layers 1" +
                       " --max-steps 4 --train " + dir / "train.tsv" + " --output-dir " + dir / "other" + " --resume " +
                       dir / "whole/checkpoint-2",
                   1);
  CHECK_THAT(other.output,
             Catch::Contains("bpe with vocab_size 40; this run asks for bpe with 30 (--spm-type, --vocab-size)"));

  run_halfgrad("eval --checkpoint " + last.string() + " --data " + dir / "train.tsv");
  const testing::ProgramResult predicted =
      run_halfgrad("predict --checkpoint " + last.string() + " 'der Hund' 'le chien'");
  CHECK_THAT(predicted.output, Catch::Contains("der Hund\t"));

  // --spm-model: the saved file trains a model with the same tokenizer (same fingerprint).
  run_halfgrad("train" + kTinyOrdered + " --tokenizer sentencepiece --layers 1 --max-steps 2 --save-steps 2 --train " +
               dir / "train.tsv" + " --spm-model " + (last / "sentencepiece.model").string() + " --output-dir " +
               dir / "loaded");
  CHECK(config_of(dir.path / "loaded/checkpoint-2").at("tokenizer") == config.at("tokenizer"));

  // Without its model file the checkpoint is refused, naming the file.
  fs::remove(last / "sentencepiece.model");
  const testing::ProgramResult missing = run_halfgrad("predict --checkpoint " + last.string() + " 'der Hund'", 1);
  CHECK_THAT(missing.output, Catch::Contains("halfgrad: error: ") && Catch::Contains("sentencepiece.model"));
}

TEST_CASE("halfgrad train --positions: learned for ordered words under layers (without bigrams), none for a bag",
          "[demo][cli][sentencepiece]") {
  const TempDir dir("positions_flag");
  write_words_tsv(dir.path / "train.tsv");
  const std::string flags = "train" + kTinyOrdered +
                            " --tokenizer words --buckets 64 --max-steps 2 --save-steps 2 --train " + dir / "train.tsv";
  run_halfgrad(flags + " --layers 1 --output-dir " + dir / "ordered");
  const nlohmann::json ordered = config_of(dir.path / "ordered/checkpoint-2");
  CHECK(ordered.at("position_embedding") == "learned");
  CHECK(ordered.at("tokenizer").at("word_ngrams") == 1);

  run_halfgrad(flags + " --layers 0 --output-dir " + dir / "bag");
  const nlohmann::json bag = config_of(dir.path / "bag/checkpoint-2");
  CHECK(bag.at("position_embedding") == "none");
  CHECK_FALSE(bag.at("tokenizer").contains("word_ngrams"));  // 2: words and bigrams

  run_halfgrad(flags + " --layers 1 --positions none --output-dir " + dir / "bag1");
  CHECK(config_of(dir.path / "bag1/checkpoint-2").at("position_embedding") == "none");

  const testing::ProgramResult wrong = run_halfgrad(flags + " --layers 1 --spm-type bpe --output-dir " + dir / "x", 1);
  CHECK_THAT(wrong.output, Catch::Contains("--spm-type applies to --tokenizer sentencepiece only (this run is words)"));
  const testing::ProgramResult both =
      run_halfgrad("train" + kTinyOrdered + " --tokenizer sentencepiece --vocab-size 30 --spm-model " +
                       dir / "train.tsv" + " --train " + dir / "train.tsv" + " --output-dir " + dir / "y",
                   1);
  CHECK_THAT(both.output, Catch::Contains("--spm-model brings its own model type and vocabulary"));
  const testing::ProgramResult too_many =
      run_halfgrad("train" + kTinyOrdered + " --tokenizer sentencepiece --vocab-size 5000 --train " +
                       dir / "train.tsv" + " --output-dir " + dir / "w",
                   1);  // SentencePiece's own message, and the flags to change
  CHECK_THAT(too_many.output,
             Catch::Contains("Vocabulary size too high (5000)") && Catch::Contains("(--spm-type, --vocab-size)"));
  const testing::ProgramResult not_a_model =
      run_halfgrad("train" + kTinyOrdered + " --tokenizer sentencepiece --spm-model " + dir / "train.tsv" +
                       " --train " + dir / "train.tsv" + " --output-dir " + dir / "z",
                   1);
  CHECK_THAT(not_a_model.output, Catch::Contains("halfgrad: error: " + dir / "train.tsv" + ": "));
}

}  // namespace hg
