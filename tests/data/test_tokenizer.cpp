// halfgrad/data/text.h and the hashed tokenizers: fastText's hash on fixed vectors, the exact n-gram
// sequence of a word, UTF-8 characters never split, Latin lower-casing, word bigrams with
// fastText's sign-extension quirk, truncation and CLS, and config validation.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/data/text.h"
#include "halfgrad/data/tokenizer.h"

namespace hg::data {
namespace {

constexpr int64_t kBig = int64_t{1} << 28;  // the largest bucket count: ids keep most hash bits

Tokenizer char_ngrams(int64_t ngram_min, int64_t ngram_max, int64_t buckets = kBig, bool cls = false) {
  return Tokenizer(
      {.kind = TokenizerKind::kCharNgrams, .ngram_min = ngram_min, .ngram_max = ngram_max, .buckets = buckets}, cls);
}

// The id the spec gives an n-gram: 1 + fasttext_hash % buckets.
int32_t id_of(const std::string& ngram, int64_t buckets = kBig) {
  return int32_t(1 + fasttext_hash(ngram) % uint64_t(buckets));
}

std::vector<int32_t> ids_of(const std::vector<std::string>& ngrams, int64_t buckets = kBig) {
  std::vector<int32_t> ids;
  for (const std::string& g : ngrams) ids.push_back(id_of(g, buckets));
  return ids;
}

}  // namespace

// Values from a line-by-line port of fastText's Dictionary::hash (docs/classifier.md, "Hash");
// the sign extension shows in the non-ASCII ones (standard FNV-1a gives 513665217 for "é").
TEST_CASE("fasttext_hash matches the fastText known-answer vectors", "[data][tokenizer]") {
  CHECK(fasttext_hash("a") == 3826002220u);
  CHECK(fasttext_hash("<ab>") == 674621742u);
  CHECK(fasttext_hash("hello") == 1335831723u);
  CHECK(fasttext_hash("\xC3\xA9") == 1023043777u);    // "é"
  CHECK(fasttext_hash("<\xC3\xA9>") == 1002806231u);  // "<é>"
  CHECK(fasttext_hash("") == 2166136261u);            // the FNV offset basis
}

TEST_CASE("char-ngrams: the n-grams of a word in computeSubwords order, without bare < and >", "[data][tokenizer]") {
  // "<ab>": start <: <a <ab <ab>; start a: a ab ab>; start b: b b>; start >: nothing.
  CHECK(char_ngrams(1, 5).encode("ab", 100) == ids_of({"<a", "<ab", "<ab>", "a", "ab", "ab>", "b", "b>"}));
  CHECK(char_ngrams(2, 3).encode("ab", 100) == ids_of({"<a", "<ab", "ab", "ab>", "b>"}));
  CHECK(char_ngrams(3, 3).encode("abc", 100) == ids_of({"<ab", "abc", "bc>"}));
  // Words are split on ASCII whitespace and concatenated in order.
  CHECK(char_ngrams(4, 4).encode("  ab\tcd\n", 100) == ids_of({"<ab>", "<cd>"}));
  // The bucket is the unsigned hash modulo buckets, plus one.
  CHECK(char_ngrams(4, 4, 1000).encode("ab", 100) == std::vector<int32_t>{int32_t(1 + 674621742u % 1000)});
}

TEST_CASE("char-ngrams: n counts UTF-8 characters, which are never split", "[data][tokenizer]") {
  const std::string e = "\xC3\xA9";  // é, 2 bytes
  CHECK(char_ngrams(1, 5).encode(e, 100) == ids_of({"<" + e, "<" + e + ">", e, e + ">"}));
  CHECK(char_ngrams(1, 5).encode(e, 100)[1] == int32_t(1 + 1002806231u % kBig));
  CHECK(char_ngrams(1, 5).encode(e, 100)[2] == int32_t(1 + 1023043777u % kBig));
  // 1-, 2-, 3- and 4-byte characters: as many n-grams as three ASCII letters, each whole.
  const std::string word = "\xC3\xB1\xE2\x82\xAC\xF0\x9F\x98\x80";  // ñ € 😀
  CHECK(utf8_chars(word) == std::vector<std::string_view>{"\xC3\xB1", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"});
  CHECK(utf8_chars("a" + word).size() == 4);
  CHECK(char_ngrams(1, 5).encode(word, 100).size() == char_ngrams(1, 5).encode("abc", 100).size());
  CHECK(char_ngrams(2, 2).encode(word, 100) ==
        ids_of({"<\xC3\xB1", "\xC3\xB1\xE2\x82\xAC", "\xE2\x82\xAC\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80>"}));
}

TEST_CASE("lower_latin maps ASCII, Latin-1 and Latin Extended-A capitals only", "[data][tokenizer]") {
  CHECK(lower_latin("Straße") == "straße");  // ß has no simple lower/upper pair here: kept
  CHECK(lower_latin("ÉTÉ") == "été");
  CHECK(lower_latin("AÇÃO") == "ação");
  CHECK(lower_latin("ÜBER Öl ÄRGER") == "über öl ärger");
  CHECK(lower_latin("ŁÓDŹ ĞÜŞ") == "łódź ğüş");  // U+0141 (odd range), U+0179, U+011E, U+015E
  CHECK(lower_latin("ŸİÞ") == "ÿiþ");            // U+0178 -> U+00FF, U+0130 -> i, U+00DE
  CHECK(lower_latin("×÷ßĸŉ") == "×÷ßĸŉ");        // U+00D7 is not a letter; the rest are lower
  CHECK(lower_latin("ΩЖ€") == "ΩЖ€");            // outside the three blocks: unchanged
  CHECK(lower_latin("") == "");
}

TEST_CASE("split_words cuts at ASCII whitespace and punctuation only", "[data][tokenizer]") {
  CHECK(split_words("Don't stop, ça-va? «oui»") ==
        std::vector<std::string_view>{"Don", "t", "stop", "ça", "va", "«oui»"});
  CHECK(split_whitespace(" a\tb\n\nc ") == std::vector<std::string_view>{"a", "b", "c"});
}

TEST_CASE("words: lower-cased unigrams, then bigrams with fastText's sign extension", "[data][tokenizer]") {
  // Bigram ids from a port of addWordNgrams with bucket 2000000 (docs/classifier.md): hash("a")
  // >= 2^31 is sign-extended, giving 616143 (1435343 without the quirk).
  const Tokenizer words({.kind = TokenizerKind::kWords, .buckets = 2000000});
  CHECK(words.encode("a hello", 100) == std::vector<int32_t>{1 + 2220, 1 + 1831723, 1 + 616143});
  CHECK(words.encode("Hello, WORLD!", 100) == std::vector<int32_t>{1 + 1831723, 1 + 933488787 % 2000000, 1 + 1485020});
  CHECK(words.vocab_size() == 2000001);
  bool cut = false;
  CHECK(words.encode("a hello", 2, &cut) == std::vector<int32_t>{1 + 2220, 1 + 1831723});
  CHECK(cut);
  CHECK(words.encode("...", 10).empty());
}

TEST_CASE("words with word_ngrams 1: the words alone, in text order (for a model with positions)",
          "[data][tokenizer]") {
  const Tokenizer ordered({.kind = TokenizerKind::kWords, .buckets = 2000000, .word_ngrams = 1});
  CHECK(ordered.encode("a hello", 100) == std::vector<int32_t>{1 + 2220, 1 + 1831723});
  CHECK(ordered.encode("hello a", 100) == std::vector<int32_t>{1 + 1831723, 1 + 2220});
  CHECK(ordered.vocab_size() == 2000001);
  CHECK_FALSE(TokenizerConfig{.kind = TokenizerKind::kWords, .word_ngrams = 1} ==
              TokenizerConfig{.kind = TokenizerKind::kWords});
  REQUIRE_THROWS_WITH(Tokenizer({.kind = TokenizerKind::kWords, .word_ngrams = 3}),
                      Catch::Contains("word_ngrams must be 1 or 2, got 3"));
}

TEST_CASE("hashed tokenizers: vocab, CLS id, truncation flag", "[data][tokenizer]") {
  const Tokenizer plain = char_ngrams(1, 5, 100), cls = char_ngrams(1, 5, 100, true);
  CHECK(plain.vocab_size() == 101);
  CHECK(cls.vocab_size() == 102);
  bool cut = true;
  const std::vector<int32_t> all = plain.encode("ab", 100, &cut);
  CHECK_FALSE(cut);
  CHECK(all.size() == 8);
  for (int32_t id : all) CHECK((id >= 1 && id <= 100));
  CHECK(plain.encode("ab", 3, &cut) == std::vector<int32_t>(all.begin(), all.begin() + 3));
  CHECK(cut);
  const std::vector<int32_t> with_cls = cls.encode("ab", 4, &cut);
  CHECK(with_cls == std::vector<int32_t>{101, all[0], all[1], all[2]});
  CHECK(cut);
  // bytes through Tokenizer is ByteTokenizer.
  CHECK(Tokenizer().encode("hé", 8) == ByteTokenizer().encode("hé", 8));
  CHECK(Tokenizer({}, true).vocab_size() == 257);
}

TEST_CASE("TokenizerConfig validation and kind names", "[data][tokenizer]") {
  // Equality ignores the sizes a kind does not use (config.json does not save them).
  CHECK(TokenizerConfig{.ngram_min = 2, .buckets = 7} == TokenizerConfig{});
  CHECK(TokenizerConfig{.kind = TokenizerKind::kWords, .ngram_max = 9} ==
        TokenizerConfig{.kind = TokenizerKind::kWords});
  CHECK_FALSE(TokenizerConfig{.kind = TokenizerKind::kWords, .buckets = 7} ==
              TokenizerConfig{.kind = TokenizerKind::kWords});
  CHECK_FALSE(TokenizerConfig{.kind = TokenizerKind::kCharNgrams, .ngram_min = 2} ==
              TokenizerConfig{.kind = TokenizerKind::kCharNgrams});
  CHECK(kTokenizerKindNames.parse("char-ngrams", "x") == TokenizerKind::kCharNgrams);
  CHECK(kTokenizerKindNames.name(TokenizerKind::kWords) == "words");
  REQUIRE_THROWS_WITH(
      kTokenizerKindNames.parse("chars", "tokenizer (--tokenizer)"),
      "tokenizer (--tokenizer): unknown value 'chars' (expected bytes, char-ngrams, words or sentencepiece)");
  REQUIRE_THROWS_WITH(char_ngrams(3, 2), Catch::Contains("ngram_min 3, ngram_max 2"));
  REQUIRE_THROWS_WITH(char_ngrams(1, 5, 0), Catch::Contains("buckets must be in [1, 2^28], got 0"));
  REQUIRE_THROWS_WITH(char_ngrams(1, 5).encode("ab", 0), Catch::Contains("max_len 0"));
}

}  // namespace hg::data
