// Tokenizers: text -> token ids for the DataLoader. `Tokenizer` is the one the Trainer, evaluation
// and the CLI use; its TokenizerConfig is saved in config.json, so a checkpoint always tokenizes as
// it was trained. Kinds: bytes, char-ngrams (fastText's subwords), words, sentencepiece; id 0 is
// padding, CLS the last id. Each kind's ids: docs/design_notes.md#tokenizers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "halfgrad/data/sentencepiece.h"

namespace hg::data {

class ByteTokenizer {
 public:
  static constexpr int32_t kPad = 0;
  static constexpr int32_t kCls = 256;

  explicit ByteTokenizer(bool use_cls = false) : use_cls_(use_cls) {}

  int64_t vocab_size() const { return use_cls_ ? 257 : 256; }
  bool uses_cls() const { return use_cls_; }
  // At most max_len ids (the CLS token counts); *truncated is set when text was cut.
  std::vector<int32_t> encode(std::string_view text, int64_t max_len, bool* truncated = nullptr) const;
  // The bytes back (padding and CLS dropped). A cut in the middle of a UTF-8 character leaves
  // that character's first bytes, which decode() keeps as they are.
  std::string decode(const std::vector<int32_t>& ids) const;

 private:
  bool use_cls_;
};

enum class TokenizerKind { kBytes, kCharNgrams, kWords, kSentencePiece };

// What a Tokenizer does (saved in config.json; halfgrad/io/model_config.h). Defaults: fastText's
// language-id subwords (1..5) over 2^16 buckets.
struct TokenizerConfig {
  TokenizerKind kind = TokenizerKind::kBytes;
  int64_t ngram_min = 1, ngram_max = 5;  // char-ngrams only
  int64_t buckets = int64_t{1} << 16;    // char-ngrams and words
  int64_t word_ngrams = 2;               // words: 2 = words then bigrams (a bag), 1 = words alone
  // sentencepiece: the model to train (spm_type, spm_vocab_size: its pieces), and once trained or
  // loaded its serialized ModelProto (the bytes of a .model file; set_spm_model fills all three).
  SpmType spm_type = SpmType::kUnigram;
  int64_t spm_vocab_size = 8000;
  std::string spm_model;

  // Loads `serialized` (throws hg::Error naming `source` if it is not a SentencePiece model) and
  // sets spm_model, spm_type and spm_vocab_size from it.
  void set_spm_model(std::string serialized, const std::string& source);
  // Trains a spm_type model of spm_vocab_size pieces on `texts` (train_sentencepiece) and sets it.
  void train_spm_model(const std::vector<std::string>& texts);
  // The rows the token table needs: every id the tokenizer emits, padding 0 and (use_cls) the
  // CLS id, which is the last. The one place that derives a vocab size from a tokenizer.
  int64_t model_vocab(bool use_cls) const;
  // Hashed n-grams (char-ngrams, words): ids are buckets of a hash, the table sized by `buckets`.
  bool hashed() const { return kind == TokenizerKind::kCharNgrams || kind == TokenizerKind::kWords; }
  // Same tokenization: fields the kind does not use (ngram_* of words, all sizes of bytes) are
  // ignored, as config.json does not save them; two sentencepiece configs with a model compare
  // the model bytes.
  bool operator==(const TokenizerConfig& other) const;
  // Throws hg::Error naming the first field out of range.
  void validate() const;
};

// --tokenizer's names, and config.json's "type" of the tokenizer.
inline constexpr EnumNames<TokenizerKind, 4> kTokenizerKindNames{{{{TokenizerKind::kBytes, "bytes"},
                                                                   {TokenizerKind::kCharNgrams, "char-ngrams"},
                                                                   {TokenizerKind::kWords, "words"},
                                                                   {TokenizerKind::kSentencePiece, "sentencepiece"}}}};

// fastText's string hash: FNV-1a 32-bit, but each byte is sign-extended before the XOR (bytes
// >= 0x80 act as 0xFFFFFF00 | byte), as every released fastText model was trained with.
uint32_t fasttext_hash(std::string_view bytes);

class Tokenizer {
 public:
  // A sentencepiece config needs its model (spm_model) by now: hg::Error otherwise.
  explicit Tokenizer(TokenizerConfig config = {}, bool use_cls = false);

  int64_t vocab_size() const { return config_.model_vocab(use_cls_); }
  const TokenizerConfig& config() const { return config_; }
  // At most max_len ids (the CLS token counts); *truncated is set when ids were dropped.
  std::vector<int32_t> encode(std::string_view text, int64_t max_len, bool* truncated = nullptr) const;

 private:
  int32_t bucket_id(uint64_t hash) const { return int32_t(1 + hash % uint64_t(config_.buckets)); }
  void char_ngrams(std::string_view word, std::vector<int32_t>& ids) const;
  void words(std::string_view text, std::vector<int32_t>& ids) const;

  TokenizerConfig config_;
  bool use_cls_;
  std::shared_ptr<const SentencePieceModel> spm_;  // sentencepiece only; shared by copies
};

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). On failure *bad_offset is the offset of the first bad byte.
bool valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

}  // namespace hg::data
