// data/: tokenizer round trip, TSV parsing and its errors, the language-id split, and the
// loader's determinism, padding and masks.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <thread>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "halfgrad/base/error.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/data/tokenizer.h"

namespace hg::data {
namespace {

std::string temp_file(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / ("halfgrad_test_" + name);
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

}  // namespace

TEST_CASE("ByteTokenizer maps UTF-8 bytes to ids and back", "[data]") {
  const ByteTokenizer tok;
  const std::string text = "caf\xC3\xA9";  // café
  const std::vector<int32_t> ids = tok.encode(text, 32);
  CHECK(ids == std::vector<int32_t>{'c', 'a', 'f', 0xC3, 0xA9});
  CHECK(tok.decode(ids) == text);
  bool cut = false;
  CHECK(tok.encode("abcdef", 4, &cut).size() == 4);
  CHECK(cut);
  const ByteTokenizer cls(true);
  CHECK(cls.encode("ab", 8) == std::vector<int32_t>{ByteTokenizer::kCls, 'a', 'b'});
  CHECK(cls.vocab_size() == 257);
  CHECK(cls.decode(cls.encode("ab", 8)) == "ab");
}

TEST_CASE("valid_utf8 rejects overlong, surrogate and truncated sequences", "[data]") {
  size_t at = 99;
  CHECK(valid_utf8("plain \xE2\x82\xAC \xF0\x9F\x98\x80"));
  CHECK_FALSE(valid_utf8("ab\xC0\xAF", &at));  // overlong '/'
  CHECK(at == 2);
  CHECK_FALSE(valid_utf8("\xED\xA0\x80"));      // a UTF-16 surrogate
  CHECK_FALSE(valid_utf8("\xE2\x82"));          // truncated
  CHECK_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(valid_utf8("\xFF"));
}

TEST_CASE("read_tsv parses labels, blank lines, tabs in text and a missing final newline", "[data]") {
  const std::string path = temp_file("ok.tsv", "pos\tgood film\n\nneg\tbad\tvery bad\r\npos\tfine");
  const Dataset d = read_tsv(path);
  CHECK(d.label_names == std::vector<std::string>{"pos", "neg"});
  REQUIRE(d.size() == 3);
  CHECK(d.examples[1].text == "bad\tvery bad");
  CHECK(d.examples[1].label == 1);
  CHECK(d.class_counts() == std::vector<int64_t>{2, 1});
  const std::string copy = temp_file("copy.tsv", "");
  write_tsv(d, copy);
  const Dataset again = read_tsv(copy);
  CHECK(again.examples.size() == 3);
  CHECK(again.examples[2].text == "fine");
}

TEST_CASE("read_tsv skips a byte-order mark and refuses labels with surrounding whitespace", "[data]") {
  const Dataset d = read_tsv(temp_file("bom.tsv",
                                       "\xEF\xBB\xBF"
                                       "en\tthe\nen\ta\r\nde\tdie\n"));
  CHECK(d.label_names == std::vector<std::string>{"en", "de"});  // not "\xEF\xBB\xBF" "en" and "en"
  CHECK(d.examples[1].text == "a");
  // Only at the very start is a BOM skipped; further on (files concatenated) it starts a label: an error.
  REQUIRE_THROWS_WITH(read_tsv(temp_file("bom2.tsv",
                                         "en\tthe\n\xEF\xBB\xBF"
                                         "en\ta\n")),
                      Catch::Contains("bom2.tsv:2: label starts with a byte-order mark"));
  REQUIRE_THROWS_WITH(read_tsv(temp_file("space.tsv", "en\tthe\n en\ta\n")),
                      Catch::Contains("space.tsv:2: label ' en' has leading or trailing whitespace"));
  REQUIRE_THROWS_WITH(read_tsv(temp_file("space2.tsv", "en \tthe\n")),
                      Catch::Contains("space2.tsv:1: label 'en ' has leading or trailing whitespace"));
}

TEST_CASE("read_tsv reads streams within its limits: /dev/zero, a long line, too many bytes", "[data]") {
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(read_tsv("/dev/zero"), Catch::Contains("/dev/zero:1: line longer than the 1048576-byte limit"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));  // bounded time
  const std::string long_line = temp_file("long.tsv", "en\tok\nen\t" + std::string(100, 'x') + "\nen\tok\n");
  CHECK(read_tsv(long_line).size() == 3);
  REQUIRE_THROWS_WITH(read_tsv(long_line, nullptr, {.limits = {.max_line_bytes = 50}}),
                      Catch::Contains("long.tsv:2: line longer than the 50-byte limit"));
  // The last line, without a newline, is held to the same limit.
  REQUIRE_THROWS_WITH(read_tsv(temp_file("tail.tsv", "en\tok\nen\t" + std::string(60, 'y')), nullptr,
                               {.limits = {.max_line_bytes = 50}}),
                      Catch::Contains("tail.tsv:2: line longer than the 50-byte limit"));
  REQUIRE_THROWS_WITH(read_tsv(long_line, nullptr, {.limits = {.max_total_bytes = 64}}),
                      Catch::Contains("long.tsv:2: the input is larger than the 64-byte limit"));
  // A pipe reads like a file, within the same limits.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::thread writer([&] {
    const std::string text = "en\tfrom a pipe\nde\taus einer Leitung\n";
    CHECK(::write(fds[1], text.data(), text.size()) == ssize_t(text.size()));
    ::close(fds[1]);
  });
  const Dataset piped = read_tsv("/proc/self/fd/" + std::to_string(fds[0]));
  writer.join();
  ::close(fds[0]);
  CHECK(piped.size() == 2);
  CHECK(piped.examples[1].text == "aus einer Leitung");
}

TEST_CASE("read_tsv errors name the file and line", "[data]") {
  REQUIRE_THROWS_WITH(read_tsv("/nonexistent/x.tsv"),
                      Catch::Contains("/nonexistent/x.tsv") && Catch::Contains("cannot open"));
  const std::string no_tab = temp_file("notab.tsv", "pos\tok\nthis line has no tab\n");
  REQUIRE_THROWS_WITH(read_tsv(no_tab), Catch::Contains("notab.tsv:2") && Catch::Contains("no tab"));
  const std::string empty_label = temp_file("nolabel.tsv", "\ttext\n");
  REQUIRE_THROWS_WITH(read_tsv(empty_label), Catch::Contains("nolabel.tsv:1") && Catch::Contains("empty label"));
  const std::string bad_utf8 = temp_file("bad.tsv", "pos\tok\npos\tbad \xC3\x28 byte\n");
  REQUIRE_THROWS_WITH(read_tsv(bad_utf8), Catch::Contains("bad.tsv:2") && Catch::Contains("invalid UTF-8 at byte 9"));
  const std::string empty = temp_file("empty.tsv", "\n\n");
  REQUIRE_THROWS_WITH(read_tsv(empty), Catch::Contains("empty.tsv") && Catch::Contains("empty"));
  const std::vector<std::string> known = {"pos", "neg"};
  const std::string unseen = temp_file("unseen.tsv", "pos\ta\nneutral\tb\n");
  REQUIRE_THROWS_WITH(read_tsv(unseen, &known), Catch::Contains("unseen.tsv:2") && Catch::Contains("'neutral'"));
}

TEST_CASE("the language-id split is balanced, disjoint and deterministic", "[data]") {
  if (!std::filesystem::exists("/usr/share/dict/ngerman")) {
    WARN("Debian word lists not installed; skipping");
    return;
  }
  const LanguageIdOptions options{.train_per_language = 200, .test_per_language = 50, .seed = 3};
  const Split a = language_id_dataset(options), b = language_id_dataset(options);
  CHECK(a.train.label_names == std::vector<std::string>{"en", "de", "fr", "es", "it", "pt", "nl"});
  CHECK(a.train.class_counts() == std::vector<int64_t>(7, 200));
  CHECK(a.test.class_counts() == std::vector<int64_t>(7, 50));
  std::set<std::string> train_words;
  for (const Example& e : a.train.examples) train_words.insert(e.text);
  for (const Example& e : a.test.examples) CHECK(train_words.count(e.text) == 0);
  for (size_t i = 0; i < a.train.examples.size(); ++i) CHECK(a.train.examples[i].text == b.train.examples[i].text);
  for (const Example& e : a.train.examples) {
    CHECK(e.text.find('\'') == std::string::npos);
    CHECK_FALSE((e.text[0] >= 'A' && e.text[0] <= 'Z'));
  }
}

TEST_CASE("DataLoader pads to the longest sequence, masks, and shuffles per epoch deterministically", "[data]") {
  Dataset d;
  d.source = "inline";
  d.label_names = {"a", "b"};
  d.examples = {{"x", 0}, {"hello", 1}, {"abc", 0}, {"this text is long", 1}, {"yz", 0}};
  const Tokenizer tok;
  DataLoader plain(d, tok, {.batch_size = 2, .shuffle = false, .max_len = 8});
  CHECK(plain.num_batches() == 3);
  CHECK(plain.truncated() == 1);
  const Batch b0 = plain.batch(0);
  CHECK(b0.ids.shape == Shape{2, 5});
  CHECK(b0.ids.values == std::vector<int32_t>{'x', 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'});
  CHECK(b0.attention_mask.values == std::vector<int32_t>{1, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  CHECK(b0.labels.values == std::vector<int32_t>{0, 1});
  CHECK(plain.batch(1).ids.shape == Shape{2, 8});  // bounded by max_len
  CHECK(plain.batch(2).size() == 1);
  DataLoader dropping(d, tok, {.batch_size = 2, .drop_last = true});
  CHECK(dropping.num_batches() == 2);

  auto order = [&](uint64_t seed, int64_t epoch) {
    DataLoader loader(d, tok, {.batch_size = 5, .seed = seed});
    loader.set_epoch(epoch);
    return loader.batch(0).rows;
  };
  CHECK(order(1, 0) == order(1, 0));
  CHECK(order(1, 0) != order(1, 1));
  std::vector<int64_t> rows = order(1, 1);
  std::sort(rows.begin(), rows.end());
  CHECK(rows == std::vector<int64_t>{0, 1, 2, 3, 4});
  REQUIRE_THROWS_WITH(DataLoader(d, tok, {.batch_size = 0}), Catch::Contains("batch_size"));
}

}  // namespace hg::data

namespace hg::data {

// HF's get_length_grouped_indices (transformers' trainer_pt_utils.py), worked by hand. 10 texts,
// batch 1: mult = min(10 / 4, 50) = 2, so mega-batches of 2, each sorted longest first:
// [0 1] [2 3] [5 4] [7 6] [8 9]; the mega-batch that starts with the longest text (5, length 9)
// swaps its first element with the order's first.
TEST_CASE("group_by_length regroups an order as HF's get_length_grouped_indices does", "[data]") {
  std::vector<int64_t> order = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  group_by_length(order, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, 1);
  CHECK(order == std::vector<int64_t>{5, 1, 2, 3, 0, 4, 7, 6, 8, 9});
  // 12 texts: mult 3. Ties keep the shuffled order (Python's sorted is stable, reverse=True
  // included): [1 0 2] [3 4 5] [6 8 7] [11 9 10], then 11 (length 9) to the front.
  order = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  group_by_length(order, {2, 5, 2, 1, 1, 1, 5, 0, 5, 3, 3, 9}, 1);
  CHECK(order == std::vector<int64_t>{11, 0, 2, 3, 4, 5, 6, 8, 7, 1, 9, 10});
  // A batch larger than a quarter of the data: one mega-batch, the whole order sorted (texts 0,
  // 1 and 2 have 1, 3 and 2 tokens).
  order = {2, 0, 1};
  group_by_length(order, {1, 3, 2}, 8);
  CHECK(order == std::vector<int64_t>{1, 2, 0});
}

Dataset texts_of_lengths(const std::vector<int>& lengths) {
  Dataset d;
  d.source = "inline";
  d.label_names = {"a", "b"};
  for (size_t i = 0; i < lengths.size(); ++i) d.examples.push_back({std::string(size_t(lengths[i]), 'x'), int(i % 2)});
  return d;
}

// 64 texts, batches of 4: mult = min(64 / 16, 50) = 4, mega-batches of 16 (4 batches).
TEST_CASE(
    "DataLoader with group_by_length sorts within mega-batches, keeps every example once, and shards as one loader",
    "[data]") {
  std::vector<int> lengths(64);
  std::iota(lengths.begin(), lengths.end(), 1);  // row i has i + 1 tokens
  const Dataset d = texts_of_lengths(lengths);
  const Tokenizer tok;
  DataLoader grouped(d, tok, {.batch_size = 4, .seed = 5, .max_len = 64, .group_by_length = true});
  for (const int64_t epoch : {0, 1}) {
    INFO("epoch " << epoch);
    grouped.set_epoch(epoch);
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < grouped.num_batches(); ++k) {
      const Batch b = grouped.batch(k);
      rows.insert(rows.end(), b.rows.begin(), b.rows.end());
      // Longest first within a mega-batch; a batch's first row may be the one the final swap moved.
      for (size_t i = 2; i < b.rows.size(); ++i) CHECK(b.rows[i] < b.rows[i - 1]);
    }
    CHECK(grouped.batch(0).rows[0] == 63);  // the longest text leads
    CHECK(grouped.batch(0).ids.shape == Shape{4, 64});
    std::sort(rows.begin(), rows.end());
    std::vector<int64_t> expected(64);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(rows == expected);
    DataLoader again(d, tok, {.batch_size = 4, .seed = 5, .max_len = 64, .group_by_length = true});
    again.set_epoch(epoch);
    CHECK(again.batch(3).rows == grouped.batch(3).rows);
  }
  // Two ranks at batch 2: rank r's batch k is every second row of the one-process batch k at 4.
  grouped.set_epoch(0);
  for (const int64_t rank : {0, 1}) {
    DataLoader shard(
        d, tok, {.batch_size = 2, .seed = 5, .max_len = 64, .num_replicas = 2, .rank = rank, .group_by_length = true});
    for (int64_t k = 0; k < shard.num_batches(); ++k) {
      const std::vector<int64_t> whole = grouped.batch(k).rows;
      CHECK(shard.batch(k).rows == std::vector<int64_t>{whole[size_t(rank)], whole[size_t(rank + 2)]});
    }
  }
}

// 32 texts of 1 token and 32 of 64, batches of 4. Sorted, a mega-batch of 16 has at most one
// batch that mixes the two lengths, and the final swap touches two more batches: at most
// 4 + 2 mixed batches of 16. A shuffle alone mixes 14 of 16 on average (a batch is all one
// length with probability about 2 / 2^4).
TEST_CASE("DataLoader with group_by_length pads a batch of short texts to short", "[data]") {
  std::vector<int> lengths;
  for (int i = 0; i < 64; ++i) lengths.push_back(i % 2 ? 64 : 1);
  const Dataset d = texts_of_lengths(lengths);
  const Tokenizer tok;
  auto mixed_batches = [](const DataLoader& loader) {
    int mixed = 0;
    for (int64_t k = 0; k < loader.num_batches(); ++k) {
      const Batch b = loader.batch(k);
      const int64_t real = std::accumulate(b.attention_mask.values.begin(), b.attention_mask.values.end(), int64_t{0});
      mixed += real != b.ids.numel();
    }
    return mixed;
  };
  for (const uint64_t seed : {1, 2, 3}) {
    INFO("seed " << seed);
    const DataLoader grouped(d, tok, {.batch_size = 4, .seed = seed, .max_len = 64, .group_by_length = true});
    const DataLoader plain(d, tok, {.batch_size = 4, .seed = seed, .max_len = 64});
    CHECK(mixed_batches(grouped) <= 6);
    CHECK(mixed_batches(plain) > 6);
  }
}

}  // namespace hg::data
