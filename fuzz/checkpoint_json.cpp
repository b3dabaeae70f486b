// libFuzzer's entry point for the target in fuzz/checkpoint_json.h.
#include <cstddef>
#include <cstdint>

#include "fuzz/checkpoint_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hg::fuzz::checkpoint_json(data, size);
}
