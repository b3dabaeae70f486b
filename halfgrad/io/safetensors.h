// safetensors files (https://github.com/huggingface/safetensors), the format of Hugging Face
// model weights: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "<name>": {"dtype": "F16", "shape": [2, 3],
//    "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8, then the raw little-endian tensor data, offsets counted
// from the start of the data. halfgrad reads and writes F32, F16 and BF16 (bit patterns kept
// exactly); other safetensors dtypes (F64, I64, F8_E4M3, ...) are rejected by name.
// Not here: memory mapping or lazy loading (files are read whole, tensor by tensor).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "halfgrad/nn/module.h"

namespace hg::io {

// What a safetensors file holds: tensors by name (the exact stored dtype) and the
// string-to-string "__metadata__".
struct SafetensorsFile {
  nn::StateDict tensors;
  std::map<std::string, std::string> metadata;
};

// The largest header the reader accepts (the reference implementation's limit, 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// "F32", "F16", "BF16": the safetensors name of a dtype.
const char* safetensors_dtype(DType dtype);

// Writes tensors in name order (std::map order), contiguously, as safetensors.load_file and
// safetensors.torch.load_file read them; metadata goes to "__metadata__" (omitted when empty).
// The file is replaced atomically (halfgrad/io/atomic_file.h). Throws hg::Error for an undefined
// tensor, the reserved name "__metadata__", or a name or value that is not valid UTF-8.
void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a whole file. Rejects, with an hg::Error naming the file and the tensor or field at
// fault, everything the reference reader rejects: a file under 8 bytes, a header length past
// the end of the file or above kMaxSafetensorsHeader, a header that is not a JSON object
// (or names a key twice), an unknown dtype, a bad shape, data_offsets that disagree with
// shape x dtype size, overlap, leave gaps, run past the end, or leave trailing bytes. Memory is
// allocated only for tensors whose extent was checked against the file size.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace hg::io
