// libFuzzer's entry point for the target in fuzz/cli_parser.h.
#include <cstddef>
#include <cstdint>

#include "fuzz/cli_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return hg::fuzz::cli_parser(data, size); }
