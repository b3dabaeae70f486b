// Fuzzes io::load_safetensors: any bytes either load (every tensor defined, with as many
// elements as its shape says) or raise hg::Error; never a crash, a leak or an allocation the
// file size does not justify (libFuzzer's -rss_limit_mb catches those).
// libFuzzer runs it from fuzz/safetensors_reader.cpp; the tests replay its committed corpus
// fuzz/corpus/safetensors_reader/ (tests/fuzz_corpus.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "halfgrad/base/error.h"
#include "fuzz/fuzz_input.h"
#include "halfgrad/io/safetensors.h"

namespace hg::fuzz {

inline int safetensors_reader(const uint8_t* data, size_t size) {
  const hg::fuzz::MemoryFile file(data, size);
  try {
    const hg::io::SafetensorsFile f = hg::io::load_safetensors(file.path());
    for (const auto& [name, tensor] : f.tensors) {
      if (!tensor.defined() || tensor.numel() != tensor.shape().numel()) std::abort();
      (void)tensor.to_vector();
    }
  } catch (const hg::Error&) {
  }
  return 0;
}

}  // namespace hg::fuzz
