// Tokenizers: text -> token ids for the DataLoader. `Tokenizer` is the one the Trainer,
// evaluation and the CLI use; its TokenizerConfig is saved in config.json, so a checkpoint always
// tokenizes as it was trained. Four kinds:
//   bytes          ByteTokenizer below (the UTF-8 bytes; vocab 256).
//   char-ngrams    fastText's subwords: for each whitespace-separated word, the character n-grams
//                  of "<" + word + ">" with ngram_min <= n <= ngram_max (n counts code points),
//                  in computeSubwords' order (each start character, then n = 1, 2, ...), without
//                  the bare "<" and ">"; the sequence is the concatenation over the words.
//   words          lower_latin() words (halfgrad/data/text.h split_words) in text order, then (word_ngrams
//                  2, the bag's default) their bigrams (fastText -wordNgrams 2 without its
//                  end-of-line token "</s>"); word_ngrams 1 keeps the words alone, a sequence in
//                  text order for a model with positions.
//   sentencepiece  the pieces of a SentencePiece model (halfgrad/data/sentencepiece.h) in text order:
//                  id = SentencePiece's id + 1, so id 0 stays padding (SentencePiece's own ids start
//                  at 0 with <unk>); vocab = pieces + 1 (+ 1 with CLS, id pieces + 1).
// Hashed kinds: id = 1 + fasttext_hash(n-gram) % buckets, so id 0 stays padding and CLS (when
// used) is buckets + 1; vocab = buckets + 1 (+ 1 with CLS). Text handling: halfgrad/data/text.h.
// Reference: facebookresearch/fastText src/dictionary.cc (hash, computeSubwords, addWordNgrams).
//
// ByteTokenizer: text as its UTF-8 bytes. Token id = byte value (1..255; byte 0 never occurs in
// text), id 0 is padding, and with a CLS token (for CLS pooling) id 256 is prepended. No
// vocabulary to learn or ship, any language works, and a model trained on it can be shared with
// bench/torch_train.py, which uses the same ids.
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

// "bytes" | "char-ngrams" | "words" | "sentencepiece"; parse_tokenizer_kind throws hg::Error
// naming the others.
std::string to_string(TokenizerKind kind);
TokenizerKind parse_tokenizer_kind(const std::string& name);

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
