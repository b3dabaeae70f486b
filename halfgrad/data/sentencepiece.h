// SentencePiece models for the `sentencepiece` tokenizer (halfgrad/data/tokenizer.h), on Debian 12's
// libsentencepiece 0.1.97 (google/sentencepiece, the library behind T5's and LLaMA's tokenizers):
// train a unigram or BPE model in memory on a data set's texts, load one from its serialized
// ModelProto (the bytes of a `.model` file), and encode text to piece ids. The library's headers
// stay inside halfgrad/data/sentencepiece.cpp; Debian ships its protobuf types only forward-declared, so
// training goes through the map form of SentencePieceTrainer::Train and loading through
// LoadFromSerializedProto.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "halfgrad/base/enum_names.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace hg::data {

// TrainerSpec.ModelType of sentencepiece_model.proto (UNIGRAM = 1, BPE = 2, WORD = 3, CHAR = 4);
// halfgrad trains the first two, and loads any.
enum class SpmType { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

// spm_train's --model_type names (--spm-type offers the first two: the types halfgrad trains).
inline constexpr EnumNames<SpmType, 4> kSpmTypeNames{
    {{{SpmType::kUnigram, "unigram"}, {SpmType::kBpe, "bpe"}, {SpmType::kWord, "word"}, {SpmType::kChar, "char"}}}};

// The settings halfgrad trains with, besides model_type and vocab_size: one thread, so the same
// texts give the same model bytes (the unigram E-step sums per-thread partial sums: another
// thread count can change them), and every text loaded (input_sentence_size 0); the rest are
// SentencePiece's defaults (nmt_nfkc normalisation, character_coverage 0.9995, unk id 0, <s> 1,
// </s> 2). Returns the serialized ModelProto. Throws hg::Error with SentencePiece's message
// (for example a vocab_size larger than the texts allow).
std::string train_sentencepiece(const std::vector<std::string>& texts, SpmType type, int64_t vocab_size);

// The bytes of a .model file (spm_train's output), checked to load as a model; at most 1 GiB.
// Throws hg::Error naming `path`.
std::string read_spm_model_file(const std::string& path);

// A loaded model. Thread-safe to encode from several threads (const).
class SentencePieceModel {
 public:
  // Throws hg::Error naming `source` when the bytes are not a SentencePiece model.
  explicit SentencePieceModel(std::string_view serialized, const std::string& source = "sentencepiece model");
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  int64_t piece_count() const;
  SpmType type() const { return type_; }
  // SentencePiece's ids (0 .. piece_count - 1, as python's sp.encode(text, out_type=int)).
  std::vector<int> encode(std::string_view text) const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  SpmType type_;
};

// The model_type a serialized ModelProto records (trainer_spec, field 2; its model_type, field 3;
// UNIGRAM when absent, the proto2 default), read from the protobuf wire format
// (protobuf.dev/programming-guides/encoding), since Debian's headers do not define ModelProto.
// Throws hg::Error on bytes that are not well-formed protobuf.
SpmType spm_model_type(std::string_view serialized);

}  // namespace hg::data
