// Byte, character n-gram, word and SentencePiece tokenization; UTF-8 validation (RFC 3629,
// Table 3-7 of the Unicode standard).
#include "halfgrad/data/tokenizer.h"

#include "halfgrad/base/error.h"
#include "halfgrad/data/text.h"

namespace hg::data {

void TokenizerConfig::validate() const {
  if (kind == TokenizerKind::kBytes) return;
  if (kind == TokenizerKind::kSentencePiece) {
    check(spm_vocab_size >= 1 && spm_vocab_size <= (int64_t{1} << 24),
          "tokenizer: vocab_size must be in [1, 2^24], got ", spm_vocab_size);
    return;
  }
  check(word_ngrams == 1 || word_ngrams == 2, "tokenizer: word_ngrams must be 1 or 2, got ", word_ngrams);
  check(buckets >= 1 && buckets <= (int64_t{1} << 28), "tokenizer: buckets must be in [1, 2^28], got ", buckets);
  if (kind == TokenizerKind::kCharNgrams) {
    check(ngram_min >= 1 && ngram_max >= ngram_min && ngram_max <= 32,
          "tokenizer: need 1 <= ngram_min <= ngram_max <= 32, got ngram_min ", ngram_min, ", ngram_max ", ngram_max);
  }
}

bool TokenizerConfig::operator==(const TokenizerConfig& o) const {
  if (kind != o.kind) return false;
  if (kind == TokenizerKind::kBytes) return true;
  if (kind == TokenizerKind::kSentencePiece) {
    return spm_type == o.spm_type && spm_vocab_size == o.spm_vocab_size && spm_model == o.spm_model;
  }
  if (kind == TokenizerKind::kWords) return buckets == o.buckets && word_ngrams == o.word_ngrams;
  return buckets == o.buckets && ngram_min == o.ngram_min && ngram_max == o.ngram_max;
}

void TokenizerConfig::set_spm_model(std::string serialized, const std::string& source) {
  const SentencePieceModel model(serialized, source);
  spm_type = model.type();
  spm_vocab_size = model.piece_count();
  spm_model = std::move(serialized);
}

void TokenizerConfig::train_spm_model(const std::vector<std::string>& texts) {
  const int64_t wanted = spm_vocab_size;
  set_spm_model(train_sentencepiece(texts, spm_type, wanted), "the trained sentencepiece model");
  check(spm_vocab_size == wanted, "sentencepiece: asked for vocab_size ", wanted, ", training gave ", spm_vocab_size);
}

int64_t TokenizerConfig::model_vocab(bool use_cls) const {
  switch (kind) {
    case TokenizerKind::kBytes:
      return ByteTokenizer(use_cls).vocab_size();
    case TokenizerKind::kSentencePiece:
      return spm_vocab_size + (use_cls ? 2 : 1);
    default:
      return buckets + (use_cls ? 2 : 1);
  }
}

uint32_t fasttext_hash(std::string_view bytes) {
  uint32_t h = 2166136261u;
  for (char c : bytes) {
    h = h ^ uint32_t(int8_t(c));  // sign extension: fastText's compatibility quirk
    h = h * 16777619u;
  }
  return h;
}

Tokenizer::Tokenizer(TokenizerConfig config, bool use_cls) : config_(std::move(config)), use_cls_(use_cls) {
  config_.validate();
  if (config_.kind != TokenizerKind::kSentencePiece) return;
  check(!config_.spm_model.empty(),
        "tokenizer: sentencepiece has no model yet (TokenizerConfig::train_spm_model trains one, set_spm_model loads "
        "one)");
  spm_ = std::make_shared<const SentencePieceModel>(config_.spm_model);
  check(spm_->piece_count() == config_.spm_vocab_size, "tokenizer: the sentencepiece model has ", spm_->piece_count(),
        " pieces, the config says vocab_size ", config_.spm_vocab_size);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, int64_t max_len, bool* truncated) const {
  if (config_.kind == TokenizerKind::kBytes) return ByteTokenizer(use_cls_).encode(text, max_len, truncated);
  check(max_len >= (use_cls_ ? 2 : 1), "Tokenizer: max_len ", max_len, " leaves no room for text");
  std::vector<int32_t> ids;
  if (use_cls_) ids.push_back(int32_t(vocab_size() - 1));
  if (config_.kind == TokenizerKind::kCharNgrams) {
    for (std::string_view word : split_whitespace(text)) char_ngrams(word, ids);
  } else if (config_.kind == TokenizerKind::kWords) {
    words(text, ids);
  } else {
    for (int id : spm_->encode(text)) ids.push_back(int32_t(id) + 1);  // 0 stays padding
  }
  if (truncated) *truncated = int64_t(ids.size()) > max_len;
  if (int64_t(ids.size()) > max_len) ids.resize(size_t(max_len));
  return ids;
}

// computeSubwords over "<" + word + ">", with n counting characters.
void Tokenizer::char_ngrams(std::string_view word, std::vector<int32_t>& ids) const {
  // Appended, not "<" + std::string(word) + ">": GCC 12 warns -Wrestrict on that expression
  // at -O2 (GCC bug 105329, a false positive in the inlined operator+).
  std::string marked;
  marked.reserve(word.size() + 2);
  marked.append("<").append(word).append(">");
  const std::vector<std::string_view> chars = utf8_chars(marked);
  const size_t count = chars.size();
  for (size_t i = 0; i < count; ++i) {
    size_t bytes = 0;
    for (size_t n = 1; n <= size_t(config_.ngram_max) && i + n <= count; ++n) {
      bytes += chars[i + n - 1].size();
      const bool bare_marker = n == 1 && (i == 0 || i + 1 == count);
      if (n >= size_t(config_.ngram_min) && !bare_marker) {
        ids.push_back(bucket_id(fasttext_hash(std::string_view(chars[i].data(), bytes))));
      }
    }
  }
}

// Unigrams, then (word_ngrams 2) addWordNgrams' bigrams: h = h * 116049371 + hash, over 64 bits
// with each 32-bit hash sign-extended first (fastText keeps the hashes in int32_t).
void Tokenizer::words(std::string_view text, std::vector<int32_t>& ids) const {
  const std::string lowered = lower_latin(text);
  std::vector<uint64_t> hashes;
  for (std::string_view w : split_words(lowered)) hashes.push_back(uint64_t(int64_t(int32_t(fasttext_hash(w)))));
  for (uint64_t h : hashes) ids.push_back(bucket_id(uint32_t(h)));
  if (config_.word_ngrams < 2) return;
  for (size_t i = 0; i + 1 < hashes.size(); ++i) ids.push_back(bucket_id(hashes[i] * 116049371u + hashes[i + 1]));
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, int64_t max_len, bool* truncated) const {
  check(max_len >= (use_cls_ ? 2 : 1), "ByteTokenizer: max_len ", max_len, " leaves no room for text");
  std::vector<int32_t> ids;
  if (use_cls_) ids.push_back(kCls);
  const size_t room = size_t(max_len) - ids.size();
  const size_t n = std::min(room, text.size());
  for (size_t i = 0; i < n; ++i) ids.push_back(int32_t(static_cast<unsigned char>(text[i])));
  if (truncated) *truncated = text.size() > room;
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id > 0 && id < 256) out += char(id);
  }
  return out;
}

bool valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = s[i];
    size_t length = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      length = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    }
    bool ok = length > 0 && i + length <= text.size();
    for (size_t k = 1; ok && k < length; ++k) {
      const unsigned char b = s[i + k];
      ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    }
    if (!ok) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += length;
  }
  return true;
}

}  // namespace hg::data
