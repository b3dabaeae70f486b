// Datasets of labelled texts: TSV files (`label<TAB>text` per line), the language
// identification set built from Debian's word lists, and a synthetic set for tests. Labels are
// ids into label_names, which a checkpoint saves with the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// Reads `label<TAB>text` lines (UTF-8). Blank lines and a missing final newline are fine; the
// text may contain further tabs. With `known_labels` (evaluation), labels map to those names and
// an unknown label is an error; without, names are assigned in order of first appearance.
// Errors (hg::Error, naming file and line): unreadable file, a line without a tab, an empty
// label, invalid UTF-8, an empty data set.
Dataset read_tsv(const std::string& path, const std::vector<std::string>* known_labels = nullptr);
void write_tsv(const Dataset& dataset, const std::string& path);

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
