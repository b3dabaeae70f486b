// DType: the element types a Tensor stores, at their real width. f16 and bf16 elements are
// the raw bit patterns of hg::half / hg::bfloat16 (uint16_t); every kernel widens them to f32 in
// registers, computes in f32, and rounds once when storing (the emulation model, README).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "halfgrad/precision/float_format.h"

namespace hg {

enum class DType : uint8_t { f32, f16, bf16 };

constexpr size_t element_size(DType t) { return t == DType::f32 ? 4 : 2; }

constexpr std::string_view dtype_name(DType t) { return t == DType::f32 ? "f32" : t == DType::f16 ? "f16" : "bf16"; }

// The narrow format a 2-byte dtype stores (f16 -> binary16, bf16 -> bfloat16).
constexpr precision::FloatFormat storage_format(DType t) {
  return t == DType::bf16 ? precision::kBFloat16 : precision::kBinary16;
}

}  // namespace hg
