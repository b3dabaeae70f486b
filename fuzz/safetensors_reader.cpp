// Fuzzes io::load_safetensors: any bytes either load (every tensor defined, with as many
// elements as its shape says) or raise hg::Error; never a crash, a leak or an allocation the
// file size does not justify (libFuzzer's -rss_limit_mb catches those).
#include <cstdint>
#include <cstdlib>

#include "halfgrad/base/error.h"
#include "fuzz/fuzz_input.h"
#include "halfgrad/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
