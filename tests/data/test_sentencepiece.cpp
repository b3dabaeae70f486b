// The sentencepiece tokenizer (halfgrad/data/sentencepiece.h, halfgrad/data/tokenizer.h): training in memory is
// reproducible (same texts, same model bytes), ids are SentencePiece's plus one with CLS last and
// truncation as for the other kinds, the model type is read back from the bytes, bad bytes are
// one error naming their source, and the ids equal python3-sentencepiece's sp.encode(text,
// out_type=int) on the same model (skipped where /usr/bin/python3 has no sentencepiece module).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/data/sentencepiece.h"
#include "halfgrad/data/tokenizer.h"
#include "tests/temp_dir.h"

namespace hg::data {
namespace {

// A small corpus of several languages' syllables (accents, ß, a non-Latin script): 600 texts of
// 6 words of 1-3 syllables, from a fixed pseudo-random sequence.
const std::vector<std::string>& spm_corpus() {
  static const std::vector<std::string> texts = [] {
    const std::vector<std::string> syllables = {"the",
                                                "cat",
                                                "sat",
                                                "on",
                                                "mat",
                                                "hou",
                                                "se",
                                                "die",
                                                "kat",
                                                "ze",
                                                "sa\xC3\x9F",
                                                "auf",
                                                "der",
                                                "stra",
                                                "le",
                                                "chat",
                                                "\xC3\xA9",
                                                "tait",
                                                "l\xC3\xA0",
                                                "mai",
                                                "son",
                                                "a",
                                                "\xC3\xA7\xC3\xA3o",
                                                "co",
                                                "ra",
                                                "ca",
                                                "ac",
                                                "qua",
                                                "\xD0\xBA\xD0\xBE\xD1\x82",
                                                "hu",
                                                "is",
                                                "ob",
                                                "ri",
                                                "ga",
                                                "do",
                                                "ne",
                                                "mo",
                                                "ti",
                                                "ver"};
    std::vector<std::string> out;
    uint32_t state = 12345;
    auto next = [&](uint32_t n) {
      state = state * 1664525u + 1013904223u;  // Numerical Recipes' LCG
      return (state >> 16) % n;
    };
    for (int i = 0; i < 600; ++i) {
      std::string text;
      for (int w = 0; w < 6; ++w) {
        if (w) text += " ";
        for (uint32_t k = 0, n = 1 + next(3); k < n; ++k) text += syllables[next(uint32_t(syllables.size()))];
      }
      out.push_back(text);
    }
    return out;
  }();
  return texts;
}

const std::string& trained(SpmType type) {
  static const std::string unigram = train_sentencepiece(spm_corpus(), SpmType::kUnigram, 80);
  static const std::string bpe = train_sentencepiece(spm_corpus(), SpmType::kBpe, 80);
  return type == SpmType::kUnigram ? unigram : bpe;
}

TokenizerConfig spm_config(SpmType type) {
  TokenizerConfig c{.kind = TokenizerKind::kSentencePiece};
  c.set_spm_model(trained(type), "test model");
  return c;
}

}  // namespace

TEST_CASE("sentencepiece: the same texts train the same model bytes, another vocab_size other bytes",
          "[data][sentencepiece]") {
  for (SpmType type : {SpmType::kUnigram, SpmType::kBpe}) {
    INFO(kSpmTypeNames.name(type));
    const std::string again = train_sentencepiece(spm_corpus(), type, 80);
    CHECK(again == trained(type));
    CHECK(train_sentencepiece(spm_corpus(), type, 60) != trained(type));
    const SentencePieceModel model(trained(type));
    CHECK(model.piece_count() == 80);
    CHECK(model.type() == type);
    CHECK(spm_model_type(trained(type)) == type);  // the wire-format reader agrees with what was trained
  }
  CHECK(trained(SpmType::kUnigram) != trained(SpmType::kBpe));
}

TEST_CASE("sentencepiece tokenizer: ids are SentencePiece's plus one, CLS is the last id, max_len cuts",
          "[data][sentencepiece]") {
  const TokenizerConfig config = spm_config(SpmType::kUnigram);
  CHECK(config.spm_vocab_size == 80);
  const SentencePieceModel model(config.spm_model);
  const std::string text = "die Katze sa\xC3\x9F auf der maison";
  std::vector<int32_t> expected;
  for (int id : model.encode(text)) expected.push_back(id + 1);
  REQUIRE(expected.size() >= 4);
  for (int32_t id : expected) CHECK((id >= 1 && id <= 80));  // 0 is padding, never a piece

  const Tokenizer plain(config);
  CHECK(plain.vocab_size() == 81);
  CHECK(plain.encode(text, 1000) == expected);
  bool cut = true;
  plain.encode(text, int64_t(expected.size()), &cut);
  CHECK_FALSE(cut);
  CHECK(plain.encode(text, 3, &cut) == std::vector<int32_t>(expected.begin(), expected.begin() + 3));
  CHECK(cut);

  const Tokenizer cls(config, true);
  CHECK(cls.vocab_size() == 82);
  std::vector<int32_t> with_cls = {81};
  with_cls.insert(with_cls.end(), expected.begin(), expected.end());
  CHECK(cls.encode(text, 1000) == with_cls);
  CHECK(config.model_vocab(true) == 82);
}

TEST_CASE("sentencepiece: bad model bytes and a config without a model are one error naming them",
          "[data][sentencepiece]") {
  TokenizerConfig c{.kind = TokenizerKind::kSentencePiece};
  CHECK_THROWS_WITH(Tokenizer(c), Catch::Contains("sentencepiece has no model yet"));
  CHECK_THROWS_WITH(c.set_spm_model("not a model", "my.model"), Catch::StartsWith("my.model: "));
  CHECK_THROWS_WITH(c.set_spm_model("", "empty.model"), Catch::Contains("empty.model: empty"));
  std::string cut = trained(SpmType::kBpe);
  cut.resize(cut.size() / 2);
  CHECK_THROWS_WITH(c.set_spm_model(cut, "half.model"), Catch::StartsWith("half.model: "));
  CHECK(c.spm_model.empty());  // nothing was set
  // The config must agree with its model's size.
  TokenizerConfig wrong = spm_config(SpmType::kBpe);
  wrong.spm_vocab_size = 81;
  CHECK_THROWS_WITH(Tokenizer(wrong), Catch::Contains("80 pieces, the config says vocab_size 81"));
  // Too large a vocabulary for the texts is SentencePiece's own error, reported.
  CHECK_THROWS_WITH(train_sentencepiece(spm_corpus(), SpmType::kUnigram, 100000),
                    Catch::Contains("vocab_size 100000 failed"));
  CHECK_THROWS_WITH(
      kSpmTypeNames.parse("wordpiece", "tokenizer: spm_type"),
      Catch::Contains("tokenizer: spm_type: unknown value 'wordpiece' (expected unigram, bpe, word or char)"));
}

TEST_CASE("sentencepiece tokenizers compare equal by their model bytes", "[data][sentencepiece]") {
  CHECK(spm_config(SpmType::kUnigram) == spm_config(SpmType::kUnigram));
  CHECK_FALSE(spm_config(SpmType::kUnigram) == spm_config(SpmType::kBpe));
  TokenizerConfig untrained{.kind = TokenizerKind::kSentencePiece};
  untrained.spm_vocab_size = 80;
  CHECK_FALSE(untrained == spm_config(SpmType::kUnigram));
}

// python3-sentencepiece 0.1.97 (Debian 12) on the same .model file: sp.encode(text, out_type=int).
TEST_CASE("sentencepiece ids match python3-sentencepiece on the same model", "[data][sentencepiece]") {
  if (std::system("/usr/bin/python3 -c 'import sentencepiece' > /dev/null 2>&1") != 0) {
    WARN("/usr/bin/python3 with python3-sentencepiece not installed: the comparison is skipped");
    return;
  }
  const testing::TempDir dir("spm_python");
  const std::vector<std::string> texts = {"the cat sat on the mat",
                                          "Die Katze sa\xC3\x9F auf der Stra\xC3\x9F"
                                          "e",
                                          "le chat \xC3\xA9tait l\xC3\xA0",
                                          "a\xC3\xA7\xC3\xA3o cora\xC3\xA7\xC3\xA3o",
                                          "\xD0\xBA\xD0\xBE\xD1\x82 huis",
                                          "unseen words \xE2\x82\xAC 42 \xF0\x9F\x99\x82",
                                          "  spaces   and\ttabs  ",
                                          "x"};
  for (SpmType type : {SpmType::kUnigram, SpmType::kBpe}) {
    INFO(kSpmTypeNames.name(type));
    std::ofstream(dir / "m.model", std::ios::binary) << trained(type);
    std::ofstream(dir / "texts.json") << nlohmann::json(texts).dump();
    const std::string script =
        "import json, sys, sentencepiece as spm; sp = spm.SentencePieceProcessor(model_file=sys.argv[1]); "
        "print(json.dumps([sp.encode(t, out_type=int) for t in json.load(open(sys.argv[2]))]))";
    FILE* pipe = popen(
        ("/usr/bin/python3 -c \"" + script + "\" " + (dir / "m.model") + " " + (dir / "texts.json")).c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    REQUIRE(pclose(pipe) == 0);
    const auto python = nlohmann::json::parse(out).get<std::vector<std::vector<int>>>();
    const SentencePieceModel model(read_spm_model_file(dir / "m.model"));
    REQUIRE(python.size() == texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      INFO(texts[i]);
      CHECK(model.encode(texts[i]) == python[i]);
    }
  }
}

}  // namespace hg::data
