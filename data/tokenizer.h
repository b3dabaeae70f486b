// Tokenizers: text -> token ids for the DataLoader. `Tokenizer` is the one the Trainer,
// evaluation and the CLI use; its TokenizerConfig is saved in config.json, so a checkpoint always
// tokenizes as it was trained. Three kinds:
//   bytes        ByteTokenizer below (the UTF-8 bytes; vocab 256).
//   char-ngrams  fastText's subwords: for each whitespace-separated word, the character n-grams
//                of "<" + word + ">" with ngram_min <= n <= ngram_max (n counts code points),
//                in computeSubwords' order (each start character, then n = 1, 2, ...), without
//                the bare "<" and ">"; the sequence is the concatenation over the words.
//   words        lower_latin() words (data/text.h split_words), then their bigrams, in text order
//                (fastText -wordNgrams 2 without its end-of-line token "</s>").
// Hashed kinds: id = 1 + fasttext_hash(n-gram) % buckets, so id 0 stays padding and CLS (when
// used) is buckets + 1; vocab = buckets + 1 (+ 1 with CLS). Text handling: data/text.h.
// Reference: facebookresearch/fastText src/dictionary.cc (hash, computeSubwords, addWordNgrams).
//
// ByteTokenizer: text as its UTF-8 bytes. Token id = byte value (1..255; byte 0 never occurs in
// text), id 0 is padding, and with a CLS token (for CLS pooling) id 256 is prepended. No
// vocabulary to learn or ship, any language works, and a model trained on it can be shared with
// bench/torch_train.py, which uses the same ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

enum class TokenizerKind { kBytes, kCharNgrams, kWords };

// What a Tokenizer does (saved in config.json; io/model_config.h). Defaults: fastText's
// language-id subwords (1..5) over 2^16 buckets.
struct TokenizerConfig {
  TokenizerKind kind = TokenizerKind::kBytes;
  int64_t ngram_min = 1, ngram_max = 5;  // char-ngrams only
  int64_t buckets = int64_t{1} << 16;    // char-ngrams and words
  // Same tokenization: fields the kind does not use (ngram_* of words, all sizes of bytes) are
  // ignored, as config.json does not save them.
  bool operator==(const TokenizerConfig& other) const;
  // Throws hg::Error naming the first field out of range.
  void validate() const;
};

// "bytes" | "char-ngrams" | "words"; parse_tokenizer_kind throws hg::Error naming the others.
std::string to_string(TokenizerKind kind);
TokenizerKind parse_tokenizer_kind(const std::string& name);

// fastText's string hash: FNV-1a 32-bit, but each byte is sign-extended before the XOR (bytes
// >= 0x80 act as 0xFFFFFF00 | byte), as every released fastText model was trained with.
uint32_t fasttext_hash(std::string_view bytes);

class Tokenizer {
 public:
  explicit Tokenizer(TokenizerConfig config = {}, bool use_cls = false);

  int64_t vocab_size() const;
  const TokenizerConfig& config() const { return config_; }
  // At most max_len ids (the CLS token counts); *truncated is set when ids were dropped.
  std::vector<int32_t> encode(std::string_view text, int64_t max_len, bool* truncated = nullptr) const;

 private:
  int32_t bucket_id(uint64_t hash) const { return int32_t(1 + hash % uint64_t(config_.buckets)); }
  void char_ngrams(std::string_view word, std::vector<int32_t>& ids) const;
  void words(std::string_view text, std::vector<int32_t>& ids) const;

  TokenizerConfig config_;
  bool use_cls_;
};

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). On failure *bad_offset is the offset of the first bad byte.
bool valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

}  // namespace hg::data
