// libFuzzer's entry point for the target in fuzz/tsv_reader.h.
#include <cstddef>
#include <cstdint>

#include "fuzz/tsv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return hg::fuzz::tsv_reader(data, size); }
