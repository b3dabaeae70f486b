// Datasets of labelled texts: TSV files (`label<TAB>text` per line), the language
// identification set built from Debian's word lists, and a synthetic set for tests. Labels are
// ids into label_names, which a checkpoint saves with the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

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
};
// "auto" | "tsv" | "fasttext"; throws hg::Error naming the others.
DataFormat parse_data_format(const std::string& name);

// Reads `label<TAB>text` lines (UTF-8), or with options.format fastText's `__label__X text`
// lines (the label "X"; the text is the rest of the line after the spaces that follow the
// label). Blank lines and a missing final newline are fine; a TSV text may contain further tabs.
// With `known_labels` (evaluation), labels map to those names and an unknown label is an error;
// without, names are assigned in order of first appearance. What auto-detection decided
// (format, header) is appended to *notes as one line each ("FILE: ...").
// Errors (hg::Error, naming file and line): unreadable file, a line without a tab, an empty
// label, a fastText line without "__label__" or with several labels, invalid UTF-8, an empty
// data set.
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
// test_per_language taken: a balanced, deterministic split (as ../shared/bench describes).
Split language_id_dataset(const LanguageIdOptions& options = {});

// A learnable synthetic task for tests: class k's texts are drawn mostly from letter block k.
Dataset synthetic_dataset(int64_t n, int64_t classes, uint64_t seed, int64_t min_len = 4, int64_t max_len = 12);

}  // namespace hg::data
