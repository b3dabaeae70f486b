// TSV reading and writing, the language identification set, and the synthetic set.
#include "halfgrad/data/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <queue>
#include <string_view>
#include <sstream>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/base/error.h"
#include "halfgrad/data/text.h"
#include "halfgrad/data/tokenizer.h"

namespace hg::data {

std::vector<int64_t> Dataset::class_counts() const {
  std::vector<int64_t> counts(label_names.size(), 0);
  for (const Example& e : examples) ++counts[size_t(e.label)];
  return counts;
}

std::string Dataset::summary() const {
  std::ostringstream out;
  out << source << ": " << size() << " examples, " << label_names.size() << " classes (";
  const std::vector<int64_t> counts = class_counts();
  for (size_t i = 0; i < counts.size(); ++i) out << (i ? ", " : "") << label_names[i] << " " << counts[i];
  out << ")";
  return out.str();
}

LineReader::LineReader(const std::string& path, ReadLimits limits)
    : source_(path == "-" ? "stdin" : path), limits_(limits) {
  if (path == "-") {
    fd_ = STDIN_FILENO;
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    check(fd_ >= 0, path, ": cannot open the data file: ", std::strerror(errno));
    owned_ = true;
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(fd_);
      fail(path, ": cannot open the data file: it is a directory");
    }
  }
}

LineReader::~LineReader() {
  if (owned_) ::close(fd_);
}

// Appends the next block to buffer_ (dropping what next() consumed); false at the end of input.
bool LineReader::fill() {
  if (eof_) return false;
  buffer_.erase(0, at_);
  at_ = 0;
  char block[1 << 16];
  ssize_t n;
  do {
    n = ::read(fd_, block, sizeof block);
  } while (n < 0 && errno == EINTR);
  check(n >= 0, source_, ": read error after line ", number_, ": ", std::strerror(errno));
  if (n == 0) eof_ = true;
  buffer_.append(block, size_t(n));
  return n > 0;
}

bool LineReader::next(std::string& line) {
  size_t end;
  while ((end = buffer_.find('\n', at_)) == std::string::npos) {
    check(int64_t(buffer_.size() - at_) <= limits_.max_line_bytes, source_, ":", number_ + 1, ": line longer than the ",
          limits_.max_line_bytes, "-byte limit (not a text file, or an endless stream?)");
    if (!fill()) break;
  }
  if (end == std::string::npos && at_ == buffer_.size()) return false;  // the end, no partial last line
  const size_t stop = end == std::string::npos ? buffer_.size() : end;
  check(int64_t(stop - at_) <= limits_.max_line_bytes, source_, ":", number_ + 1, ": line longer than the ",
        limits_.max_line_bytes, "-byte limit (not a text file, or an endless stream?)");
  total_ += int64_t(stop - at_) + (end == std::string::npos ? 0 : 1);
  check(total_ <= limits_.max_total_bytes, source_, ":", number_ + 1, ": the input is larger than the ",
        limits_.max_total_bytes, "-byte limit (an endless stream?)");
  line.assign(buffer_, at_, stop - at_);
  at_ = end == std::string::npos ? buffer_.size() : end + 1;
  ++number_;
  if (!line.empty() && line.back() == '\r') line.pop_back();           // CRLF files
  if (first_ && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a byte-order mark
  first_ = false;
  return true;
}

namespace {

constexpr std::string_view kFastTextLabel = "__label__";

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// Whether the line starts (after spaces) with fastText's label prefix.
bool fasttext_line(const std::string& line) {
  const size_t start = line.find_first_not_of(" \t");
  return start != std::string::npos && line.compare(start, kFastTextLabel.size(), kFastTextLabel) == 0;
}

bool header_name(std::string label) {
  for (char& c : label) c = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
  for (const char* name : {"label", "labels", "class", "category", "target", "y", "lang", "language"}) {
    if (label == name) return true;
  }
  return false;
}

// Whether a TSV header is to be skipped: kAuto decides by the first line's label (a column name
// that no later line uses as a label) and says so in *notes. `lines`: the non-blank lines.
bool skip_header(const std::vector<std::pair<int64_t, std::string>>& lines, const std::string& path, HeaderMode mode,
                 std::vector<std::string>* notes) {
  if (mode != HeaderMode::kAuto || lines.empty()) return mode == HeaderMode::kYes;
  const auto& [number, line] = lines.front();
  const size_t tab = line.find('\t');
  if (tab == std::string::npos || !header_name(line.substr(0, tab))) return false;
  const std::string prefix = line.substr(0, tab + 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].second.compare(0, prefix.size(), prefix) == 0) return false;  // a later line uses that label
  }
  if (notes) {
    notes->push_back(path + ":" + std::to_string(number) + ": '" + line.substr(0, 40) +
                     "' looks like a header line and was skipped (--no-header reads it as data)");
  }
  return true;
}

// A fastText line: "__label__X text" -> {X, text}; errors name the line.
std::pair<std::string, std::string> split_fasttext(const std::string& line, const std::string& at) {
  check(fasttext_line(line), at, ": expected '__label__X text' (fastText format), found no leading __label__");
  const size_t start = line.find_first_not_of(" \t");
  const size_t end = std::min(line.find_first_of(" \t", start), line.size());
  const std::string label = line.substr(start + kFastTextLabel.size(), end - start - kFastTextLabel.size());
  check(!label.empty(), at, ": empty label after __label__");
  const size_t text = std::min(line.find_first_not_of(" \t", end), line.size());
  check(line.compare(text, kFastTextLabel.size(), kFastTextLabel) != 0, at,
        ": several __label__ labels on one line; halfgrad trains one label per text");
  return {label, line.substr(text)};
}

}  // namespace

Dataset read_tsv(const std::string& path, const std::vector<std::string>* known_labels, const ReadOptions& options,
                 std::vector<std::string>* notes) {
  // Every non-blank line first, within the limits: detecting the format or a header looks ahead,
  // and a stream cannot rewind.
  std::vector<std::pair<int64_t, std::string>> lines;
  {
    LineReader reader(path, options.limits);
    std::string line;
    while (reader.next(line)) {
      if (!blank(line)) lines.emplace_back(reader.line_number(), std::move(line));
    }
  }
  DataFormat format = options.format;
  if (format == DataFormat::kAuto) {
    format = !lines.empty() && fasttext_line(lines.front().second) ? DataFormat::kFastText : DataFormat::kTsv;
    if (format == DataFormat::kFastText && notes) {
      notes->push_back(path + ": read as fastText's '__label__X text' lines (--input-format tsv reads label<TAB>text)");
    }
  }
  const bool skip =
      format == DataFormat::kTsv ? skip_header(lines, path, options.header, notes) : options.header == HeaderMode::kYes;
  Dataset dataset;
  dataset.source = path;
  std::map<std::string, int32_t> ids;
  if (known_labels) {
    dataset.label_names = *known_labels;
    for (size_t i = 0; i < known_labels->size(); ++i) ids[(*known_labels)[i]] = int32_t(i);
  }
  for (size_t i = skip ? 1 : 0; i < lines.size(); ++i) {
    const auto& [number, line] = lines[i];
    size_t bad = 0;
    const bool valid = valid_utf8(line, &bad);  // before check(): argument order is unspecified
    check(valid, path, ":", number, ": invalid UTF-8 at byte ", bad + 1);
    const std::string at = path + ":" + std::to_string(number);
    std::string label, text;
    if (format == DataFormat::kFastText) {
      std::tie(label, text) = split_fasttext(line, at);
    } else {
      const size_t tab = line.find('\t');
      check(tab != std::string::npos, at, ": expected 'label<TAB>text', found no tab",
            fasttext_line(line) ? " (fastText's '__label__X text' lines: --input-format fasttext)" : "");
      label = line.substr(0, tab);
      text = line.substr(tab + 1);
    }
    check(!label.empty(), at, ": empty label");
    check(!is_ascii_space(label.front()) && !is_ascii_space(label.back()), at, ": label '", label,
          "' has leading or trailing whitespace (it would be a class of its own): remove it");
    check(label.rfind("\xEF\xBB\xBF", 0) != 0, at,
          ": label starts with a byte-order mark (U+FEFF; files concatenated?): it would be a class of its own");
    auto it = ids.find(label);
    if (it == ids.end()) {
      check(known_labels == nullptr, at, ": label '", label,
            "' was not seen in training (known: ", known_labels ? known_labels->size() : 0, " labels)");
      it = ids.emplace(label, int32_t(dataset.label_names.size())).first;
      dataset.label_names.push_back(label);
    }
    dataset.examples.push_back({std::move(text), it->second});
  }
  check(!dataset.examples.empty(), path, ": the data set is empty");
  return dataset;
}

void write_tsv(const Dataset& dataset, const std::string& path) {
  std::ofstream file(path, std::ios::binary);
  check(file.good(), path, ": cannot open for writing");
  for (const Example& e : dataset.examples) file << dataset.label_names[size_t(e.label)] << '\t' << e.text << '\n';
  check(file.good(), path, ": write error");
}

int64_t default_buckets(const Dataset& train, TokenizerConfig config) {
  constexpr int64_t kMax = int64_t{1} << 18, kMin = int64_t{1} << 10;
  config.buckets = int64_t{1} << 28;  // the largest TokenizerConfig allows: distinct ids ~ distinct n-grams
  const Tokenizer tokenizer(config);
  std::unordered_set<int32_t> distinct;  // stops growing at kMax / 4: past that the answer is kMax
  for (size_t i = 0; i < train.examples.size() && int64_t(distinct.size()) < kMax / 4; ++i) {
    for (const int32_t id : tokenizer.encode(train.examples[i].text, std::numeric_limits<int32_t>::max())) {
      distinct.insert(id);
    }
  }
  int64_t buckets = kMin;
  while (buckets < kMax && buckets < 4 * int64_t(distinct.size())) buckets *= 2;
  return buckets;
}

namespace {

struct Language {
  const char* code;
  const char* file;
};
constexpr Language kLanguages[] = {
    {"en", "american-english"}, {"de", "ngerman"},    {"fr", "french"}, {"es", "spanish"},
    {"it", "italian"},          {"pt", "portuguese"}, {"nl", "dutch"}};

// A word starts with a capital when its first character is ASCII A-Z or a Latin-1 capital
// (U+00C0..U+00DE except U+00D7, encoded C3 80..C3 9E).
bool capitalised(std::string_view w) {
  const auto c0 = static_cast<unsigned char>(w[0]);
  if (c0 >= 'A' && c0 <= 'Z') return true;
  if (c0 == 0xC3 && w.size() > 1) {
    const auto c1 = static_cast<unsigned char>(w[1]);
    return c1 >= 0x80 && c1 <= 0x9E && c1 != 0x97;
  }
  return false;
}

void shuffle(std::vector<std::string_view>& items, Generator& gen) {  // Fisher-Yates
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[gen.next_u32() % i]);
}

// One word list: the file's bytes, lower-cased in place, and its usable words as views into
// them, sorted and unique: no capitalised words (proper nouns), none with an apostrophe, only
// valid UTF-8. Lines end at '\n' (the last one may not). Views, not strings: the 1.3 million
// words of the seven lists are sorted and merged without a copy each.
struct WordList {
  std::string text;
  std::vector<std::string_view> words;
};

WordList read_word_list(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  check(file.good(), path,
        ": cannot open the word list (install the Debian packages wamerican wngerman "
        "wfrench wspanish witalian wportuguese wdutch)");
  WordList list;
  list.text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  check(!file.bad(), path, ": read error");
  const std::string_view text = list.text;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view w = text.substr(begin, end - begin);
    if (!w.empty() && !capitalised(w) && w.find('\'') == std::string_view::npos && valid_utf8(w)) {
      for (size_t i = begin; i < end; ++i) {
        char& c = list.text[i];
        c = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
      }
      list.words.push_back(w);
    }
    begin = end + 1;
  }
  std::sort(list.words.begin(), list.words.end());
  list.words.erase(std::unique(list.words.begin(), list.words.end()), list.words.end());
  return list;
}

// The words of each list that no other list holds, each in sorted order: a merge of the sorted
// lists, which visits every distinct word once, with the lists that hold it.
std::vector<std::vector<std::string_view>> unique_words(const std::vector<WordList>& lists) {
  using Head = std::pair<std::string_view, size_t>;  // a list's next word, the list
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<size_t> next(lists.size(), 0);
  for (size_t k = 0; k < lists.size(); ++k) {
    if (!lists[k].words.empty()) heads.emplace(lists[k].words[0], k);
  }
  std::vector<std::vector<std::string_view>> unique(lists.size());
  while (!heads.empty()) {
    const std::string_view word = heads.top().first;
    const size_t first_holder = heads.top().second;
    size_t holders = 0;
    while (!heads.empty() && heads.top().first == word) {
      const size_t k = heads.top().second;
      heads.pop();
      ++holders;
      if (++next[k] < lists[k].words.size()) heads.emplace(lists[k].words[next[k]], k);
    }
    if (holders == 1) unique[first_holder].push_back(word);
  }
  return unique;
}

}  // namespace

Split language_id_dataset(const LanguageIdOptions& options) {
  std::vector<WordList> lists;
  for (const Language& language : kLanguages) lists.push_back(read_word_list(options.dict_dir + "/" + language.file));
  std::vector<std::vector<std::string_view>> unique = unique_words(lists);
  Split split;
  for (Dataset* d : {&split.train, &split.test}) {
    for (const Language& language : kLanguages) d->label_names.push_back(language.code);
  }
  split.train.source = "language-id train";
  split.test.source = "language-id test";
  const int64_t need = options.train_per_language + options.test_per_language;
  for (size_t k = 0; k < lists.size(); ++k) {
    check(int64_t(unique[k].size()) >= need, "language-id: ", kLanguages[k].file, " has ", unique[k].size(),
          " usable words, ", need, " needed");
    Generator gen(options.seed, uint64_t(k) << 40);  // one stream per language
    shuffle(unique[k], gen);                         // from the sorted order
    for (int64_t i = 0; i < need; ++i) {
      Dataset& target = i < options.train_per_language ? split.train : split.test;
      target.examples.push_back({std::string(unique[k][size_t(i)]), int32_t(k)});
    }
  }
  return split;
}

Dataset synthetic_dataset(int64_t n, int64_t classes, uint64_t seed, int64_t min_len, int64_t max_len) {
  check(classes >= 2 && classes <= 13 && n >= 1 && min_len >= 1 && max_len >= min_len,
        "synthetic_dataset: need 2..13 classes, n >= 1 and 1 <= min_len <= max_len");
  Generator gen(seed);
  Dataset d;
  d.source = "synthetic";
  for (int64_t k = 0; k < classes; ++k) d.label_names.push_back("class" + std::to_string(k));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = int32_t(gen.next_u32() % uint32_t(classes));
    const int64_t length = min_len + int64_t(gen.next_u32() % uint32_t(max_len - min_len + 1));
    std::string text;
    for (int64_t j = 0; j < length; ++j) {
      // 80% from the class's own block of two letters, 20% from anywhere in a..z.
      const bool own = gen.next_u32() % 5 != 0;
      text += own ? char('a' + 2 * label + int32_t(gen.next_u32() % 2)) : char('a' + gen.next_u32() % 26);
    }
    d.examples.push_back({text, label});
  }
  return d;
}

}  // namespace hg::data
