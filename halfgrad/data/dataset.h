// Datasets of labelled texts: TSV files (`label<TAB>text` per line), the language
// identification set built from Debian's word lists, and a synthetic set for tests. Labels are
// ids into label_names, which a checkpoint saves with the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfgrad/data/tokenizer.h"

namespace hg::data {

struct Example {
  std::string text;
  int32_t label;
};

struct Dataset {
  std::vector<Example> examples;
  std::vector<std::string> label_names;
  std::string source;  // file path or a description, for messages

  int64_t size() const { return int64_t(examples.size()); }
  std::vector<int64_t> class_counts() const;
  // "train.tsv: 42000 examples, 7 classes (en 6000, de 6000, ...)"
  std::string summary() const;
};

// The bounds of every text input (TSV files, predict's stdin): a line longer than
// max_line_bytes, or more than max_total_bytes in all, is an error naming the source, the line
// and the limit, so an endless stream (/dev/zero, `yes`) or a multi-gigabyte line fails after
// reading at most the limit instead of growing memory until killed. Texts are cut to max_len
// tokens (at most 4096) anyway, so 1 MiB per line leaves ample room.
struct ReadLimits {
  int64_t max_line_bytes = int64_t{1} << 20;   // 1 MiB, the newline excluded
  int64_t max_total_bytes = int64_t{4} << 30;  // 4 GiB
};

// Lines of a file or stream, read in blocks through read(2): regular files, pipes, character
// devices and stdin alike, within ReadLimits. A "\r\n" ending loses its "\r"; a UTF-8 byte-order
// mark (EF BB BF) at the very start is skipped, as Python's "utf-8-sig" does.
class LineReader {
 public:
  // path "-" reads stdin (named "stdin" in messages). Throws hg::Error naming `path` when it
  // cannot be opened.
  explicit LineReader(const std::string& path, ReadLimits limits = {});
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  // The next line into `line`; false at the end of the input.
  bool next(std::string& line);
  int64_t line_number() const { return number_; }
  const std::string& source() const { return source_; }

 private:
  bool fill();
  std::string source_;
  ReadLimits limits_;
  int fd_ = -1;
  bool owned_ = false, eof_ = false, first_ = true;
  std::string buffer_;
  size_t at_ = 0;
  int64_t number_ = 0, total_ = 0;  // lines and bytes returned so far
};

// How a labelled text file is laid out (`halfgrad --input-format`, `--header`).
enum class DataFormat {
  kAuto,      // fastText when the first non-blank line starts with "__label__", else TSV
  kTsv,       // label<TAB>text
  kFastText,  // __label__X text (fastText's supervised format; one label a line)
};
enum class HeaderMode {
  kNo,    // every line is data
  kYes,   // the first non-blank line is a header, skipped
  kAuto,  // TSV: skip a first line whose label is a column name ("label", "class", "category",
          // "target", "y", "lang", "language", any case) that no other line uses as a label
};
struct ReadOptions {
  DataFormat format = DataFormat::kTsv;
  HeaderMode header = HeaderMode::kNo;
  ReadLimits limits;
};
// --input-format's names.
inline constexpr EnumNames<DataFormat, 3> kDataFormatNames{
    {{{DataFormat::kAuto, "auto"}, {DataFormat::kTsv, "tsv"}, {DataFormat::kFastText, "fasttext"}}}};

// Reads `label<TAB>text` lines (UTF-8), or with options.format fastText's `__label__X text`
// lines (the label "X"; the text is the rest of the line after the spaces that follow the
// label), within options.limits (a file or a stream: every line is read first, so detection
// needs no rewind). Blank lines and a missing final newline are fine; a byte-order mark at the
// start is skipped; a TSV text may contain further tabs. With `known_labels` (evaluation),
// labels map to those names and an unknown label is an error; without, names are assigned in
// order of first appearance. What auto-detection decided (format, header) is appended to *notes
// as one line each ("FILE: ...").
// Errors (hg::Error, naming file and line): unreadable file, a line or file past the limits, a
// line without a tab, an empty label, a label with leading or trailing whitespace (" en" would
// silently be a class of its own) or starting with a byte-order mark past the first line, a
// fastText line without "__label__" or with several labels, invalid UTF-8, an empty data set.
Dataset read_tsv(const std::string& path, const std::vector<std::string>* known_labels = nullptr,
                 const ReadOptions& options = {}, std::vector<std::string>* notes = nullptr);
void write_tsv(const Dataset& dataset, const std::string& path);

// The hash buckets (embedding rows) a hashed tokenizer (`config.kind` char-ngrams or words, with
// its n-gram sizes) gets when none are given: with d the distinct n-grams of `train`'s texts,
// min(2^18, max(2^10, the power of two at or above 4 d)). At d / buckets <= 1/4 an n-gram shares
// its bucket with no other with probability e^(-d/buckets) >= 78% (d n-grams hashed uniformly);
// past 2^18 rows the main job gained nothing (docs/classifier.md). The main job's 42,000 words
// have more than 2^15 distinct n-grams, so it keeps 2^18; 30 of its words get 2^12 (a checkpoint
// of 1.6 MB instead of 97 MB). n-grams are told apart by their hash modulo 2^28.
int64_t default_buckets(const Dataset& train, TokenizerConfig config);

struct LanguageIdOptions {
  std::string dict_dir = "/usr/share/dict";
  int64_t train_per_language = 6000;
  int64_t test_per_language = 1000;
  uint64_t seed = 0;
};

struct Split {
  Dataset train, test;
};

// Word -> language, from 7 Debian word lists (american-english, ngerman, french, spanish,
// italian, portuguese, dutch; packages wamerican, wngerman, wfrench, wspanish, witalian,
// wportuguese, wdutch). Capitalised words (proper nouns) and words with apostrophes are
// dropped, the rest lower-cased (ASCII), and words in more than one list dropped; then each
// language's words are shuffled with `seed` and the first train_per_language /
// test_per_language taken: a balanced, deterministic split (bench/torch_train.py reads the same).
Split language_id_dataset(const LanguageIdOptions& options = {});

// A learnable synthetic task for tests: class k's texts are drawn mostly from letter block k.
Dataset synthetic_dataset(int64_t n, int64_t classes, uint64_t seed, int64_t min_len = 4, int64_t max_len = 12);

}  // namespace hg::data
