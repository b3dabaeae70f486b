// Fuzzes data::read_tsv: any bytes either load as a data set whose every example is valid
// UTF-8 with a label in range (labels without surrounding whitespace or a leading byte-order
// mark), or raise hg::Error. The first byte chooses between training mode (labels assigned) and
// evaluation mode (labels must be among two known ones) (bit 0), the format (bits 1-2: tsv, auto,
// fasttext) and the header mode (bits 3-4: no, yes, auto).
// libFuzzer runs it from fuzz/tsv_reader.cpp; the tests replay its committed corpus
// fuzz/corpus/tsv_reader/ (tests/fuzz_corpus.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "halfgrad/base/error.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/data/text.h"
#include "halfgrad/data/tokenizer.h"
#include "fuzz/fuzz_input.h"

namespace hg::fuzz {

inline int tsv_reader(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool evaluation = data[0] & 1;
  using hg::data::DataFormat, hg::data::HeaderMode;
  const hg::data::ReadOptions options = {
      .format =
          std::array{DataFormat::kTsv, DataFormat::kAuto, DataFormat::kFastText, DataFormat::kTsv}[(data[0] >> 1) & 3],
      .header = std::array{HeaderMode::kNo, HeaderMode::kYes, HeaderMode::kAuto, HeaderMode::kNo}[(data[0] >> 3) & 3]};
  std::vector<std::string> notes;
  const hg::fuzz::MemoryFile file(data + 1, size - 1);
  const std::vector<std::string> known = {"en", "de"};
  try {
    const hg::data::Dataset d = hg::data::read_tsv(file.path(), evaluation ? &known : nullptr, options, &notes);
    if (d.examples.empty() || (evaluation && d.label_names != known)) std::abort();
    for (const hg::data::Example& e : d.examples) {
      if (e.label < 0 || size_t(e.label) >= d.label_names.size() || !hg::data::valid_utf8(e.text)) std::abort();
    }
    for (const std::string& label : d.label_names) {  // no silent new class: trimmed, no byte-order mark
      if (label.empty() || hg::data::is_ascii_space(label.front()) || hg::data::is_ascii_space(label.back()) ||
          label.rfind("\xEF\xBB\xBF", 0) == 0) {
        std::abort();
      }
    }
    (void)d.summary();
  } catch (const hg::Error&) {
  }
  return 0;
}

}  // namespace hg::fuzz
