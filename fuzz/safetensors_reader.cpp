// libFuzzer's entry point for the target in fuzz/safetensors_reader.h.
#include <cstddef>
#include <cstdint>

#include "fuzz/safetensors_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hg::fuzz::safetensors_reader(data, size);
}
