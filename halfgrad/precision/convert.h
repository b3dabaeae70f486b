// Vector conversions between f32 and the narrow formats (f16, bf16, fp8 e4m3/e5m2) over spans:
// encode (f32 -> bits), decode (bits -> f32) and round_to (f32 -> format -> f32 in place, the
// emulation primitive). Highway kernels chosen at run time (convert.cpp), equal bit for bit to the
// scalar core encode<F>/decode<F> (float_format.h) for every rounding option; OpenMP splits long
// spans. Per-target helpers for other kernels live in convert-inl.h; this header has no Highway.
#pragma once

#include <cstdint>
#include <span>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/numerics_stats.h"
#include "halfgrad/precision/rounding.h"

namespace hg::precision {

struct ConvertOptions {
  // With Rounding::kStochastic, element i of the span draws stochastic_bits(seed, offset + i)
  // (stochastic.h), so a cast is reproducible whatever the thread count, and a long tensor cast
  // in pieces gets the same bits with matching offsets. rounding.random_bits (one value's bits)
  // has no meaning here: a nonzero value throws hg::Error rather than being ignored.
  RoundingOptions rounding{};
  uint64_t seed = 0;
  uint64_t offset = 0;
  // Optional: receives (merged into it, not overwritten) what this cast did; see NumericsStats.
  // Counting costs a scalar pass for the histogram (about 0.4 ns a value) and takes the general
  // integer path even where default options have a shortcut (F16C for f16, bf16's add trick).
  NumericsStats* stats = nullptr;
};

// f32 -> bit patterns of `format`: kBinary16 and kBFloat16 into uint16_t, kE4M3 and kE5M2 into
// uint8_t. Throws hg::Error if the spans' sizes differ (naming both), the format
// does not fit the storage type, or options.rounding.random_bits is set.
void encode(FloatFormat format, std::span<const float> src, std::span<uint16_t> dst,
            const ConvertOptions& options = {});
void encode(FloatFormat format, std::span<const float> src, std::span<uint8_t> dst, const ConvertOptions& options = {});

// Bit patterns of `format` -> the exact f32 values (NaNs quieted, sign and payload kept).
void decode(FloatFormat format, std::span<const uint16_t> src, std::span<float> dst);
void decode(FloatFormat format, std::span<const uint8_t> src, std::span<float> dst);

// values[i] = decode(encode(values[i])): rounds every value to the nearest `format` value (per
// the options) without leaving f32 storage. This is what an emulated f16/bf16/fp8 op does to its
// f32 result.
void round_to(FloatFormat format, std::span<float> values, const ConvertOptions& options = {});

template <class T>  // T: hg::half, hg::bfloat16, hg::float8_e4m3, hg::float8_e5m2
void round_to(std::span<float> values, const ConvertOptions& options = {}) {
  round_to(T::kFormat, values, options);
}

}  // namespace hg::precision

namespace hg {
using precision::ConvertOptions;
using precision::decode;
using precision::encode;
using precision::round_to;
}  // namespace hg
