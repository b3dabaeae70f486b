// data::read_tsv's ReadOptions: fastText's `__label__X text` lines (given or detected, with a
// note), a header line (given, refused, or detected with a note), the errors that name the line;
// and data::default_buckets against n-grams counted here by hand.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "halfgrad/data/dataset.h"
#include "tests/temp_dir.h"

namespace hg::data {
namespace {

using testing::error_of;
using testing::TempDir;

TEST_CASE("read_tsv reads fastText lines, given or detected with a note", "[data][read_options]") {
  const TempDir dir("fasttext_format");
  const std::string file = dir / "train.txt";
  testing::write_bytes(file, "__label__en the cat\n\n__label__fr  le chat noir\r\n  __label__en\ta dog\n");
  std::vector<std::string> notes;
  const Dataset d = read_tsv(file, nullptr, {.format = DataFormat::kAuto}, &notes);
  REQUIRE(d.size() == 3);
  CHECK(d.label_names == std::vector<std::string>{"en", "fr"});
  CHECK(d.examples[0].text == "the cat");
  CHECK(d.examples[1].text == "le chat noir");  // the spaces after the label are its separator
  CHECK(d.examples[1].label == 1);
  CHECK(d.examples[2].text == "a dog");
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains(file + ": read as fastText's '__label__X text' lines"));
  // Given explicitly: no note; the same data.
  notes.clear();
  const Dataset given = read_tsv(file, nullptr, {.format = DataFormat::kFastText}, &notes);
  CHECK(notes.empty());
  CHECK(given.examples[1].text == "le chat noir");
  // Read as TSV, a fastText line is refused with the hint.
  CHECK_THAT(error_of([&] { read_tsv(file, nullptr, {.format = DataFormat::kTsv}); }),
             Catch::Contains(file + ":1: expected 'label<TAB>text', found no tab (fastText's '__label__X text' lines: "
                                    "--input-format fasttext)"));
  testing::write_bytes(file, "__label__en the cat\nle chat\n");
  CHECK_THAT(error_of([&] { read_tsv(file, nullptr, {.format = DataFormat::kAuto}); }),
             Catch::Contains(file + ":2: expected '__label__X text' (fastText format), found no leading __label__"));
  testing::write_bytes(file, "__label__en __label__fr the cat\n");
  CHECK_THAT(error_of([&] { read_tsv(file, nullptr, {.format = DataFormat::kFastText}); }),
             Catch::Contains(file + ":1: several __label__ labels on one line"));
  testing::write_bytes(file, "__label__ the cat\n");
  CHECK_THAT(error_of([&] { read_tsv(file, nullptr, {.format = DataFormat::kFastText}); }),
             Catch::Contains(file + ":1: empty label after __label__"));
  CHECK(kDataFormatNames.parse("fasttext", "x") == DataFormat::kFastText);
  CHECK_THAT(error_of([&] { kDataFormatNames.parse("csv", "--input-format"); }),
             Catch::Contains("--input-format: unknown value 'csv' (expected auto, tsv or fasttext)"));
}

TEST_CASE("read_tsv skips a header line: given, or detected with a note", "[data][read_options]") {
  const TempDir dir("header_line");
  const std::string file = dir / "train.tsv";
  testing::write_bytes(file, "\nLabel\ttext\nen\tthe cat\nfr\tle chat\n");
  std::vector<std::string> notes;
  const Dataset detected = read_tsv(file, nullptr, {.header = HeaderMode::kAuto}, &notes);
  CHECK(detected.label_names == std::vector<std::string>{"en", "fr"});
  CHECK(detected.size() == 2);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains(file + ":2: 'Label\ttext' looks like a header line and was skipped"));
  // The default (library) and --no-header: a class like any other.
  CHECK(read_tsv(file).label_names == std::vector<std::string>{"Label", "en", "fr"});
  CHECK(read_tsv(file, nullptr, {.header = HeaderMode::kNo}).size() == 3);
  // --header skips the first line whatever it holds.
  testing::write_bytes(file, "lang\tword\nen\tthe cat\n");
  CHECK(read_tsv(file, nullptr, {.header = HeaderMode::kYes}).label_names == std::vector<std::string>{"en"});
  // A column name that is also a label of later lines is data, not a header.
  testing::write_bytes(file, "y\tyes\nn\tno\ny\tyep\n");
  notes.clear();
  CHECK(read_tsv(file, nullptr, {.header = HeaderMode::kAuto}, &notes).size() == 3);
  CHECK(notes.empty());
  // Evaluation data: the header is skipped before its label could be called unknown.
  const std::vector<std::string> known = {"en", "fr"};
  testing::write_bytes(file, "label\ttext\nfr\tle chat\n");
  CHECK(read_tsv(file, &known, {.header = HeaderMode::kAuto}).size() == 1);
  CHECK_THAT(error_of([&] { read_tsv(file, &known); }), Catch::Contains(":1: label 'label' was not seen in training"));
}

// fastText's subwords of one ASCII word, as tokenizer.h defines them: the n-grams (1..5) of
// "<word>" without the bare markers.
void add_ngrams(const std::string& word, std::set<std::string>& out) {
  const std::string marked = "<" + word + ">";
  for (size_t i = 0; i < marked.size(); ++i) {
    for (size_t n = 1; n <= 5 && i + n <= marked.size(); ++n) {
      if (n == 1 && (i == 0 || i + 1 == marked.size())) continue;
      out.insert(marked.substr(i, n));
    }
  }
}

TEST_CASE("default_buckets is min(2^18, max(2^10, the power of two at or above 4 x the distinct n-grams))",
          "[data][read_options]") {
  const TokenizerConfig config{.kind = TokenizerKind::kCharNgrams};
  for (const int64_t n : {1, 30, 400, 3000}) {
    const Dataset d = synthetic_dataset(n, 4, 7, 4, 12);
    std::set<std::string> grams;
    for (const Example& e : d.examples) add_ngrams(e.text, grams);
    int64_t expected = 1024;
    while (expected < (int64_t{1} << 18) && expected < 4 * int64_t(grams.size())) expected *= 2;
    INFO(n << " texts, " << grams.size() << " distinct n-grams");
    CHECK(default_buckets(d, config) == expected);
  }
  // Past 2^16 distinct n-grams: the cap.
  Dataset many;
  many.label_names = {"a"};
  uint32_t state = 1;
  for (int i = 0; i < 30000; ++i) {  // words of 8 letters from a linear congruential generator
    std::string word;
    for (int k = 0; k < 8; ++k) word += char('a' + ((state = state * 1664525u + 1013904223u) >> 16) % 26);
    many.examples.push_back({word, 0});
  }
  CHECK(default_buckets(many, config) == int64_t{1} << 18);
}

}  // namespace
}  // namespace hg::data
