// Moving elements between a tensor's storage dtype and f32 working buffers. Ops compute in
// f32 on chunks: load the inputs as f32 (exact), run an f32 kernel, store the result rounded
// once with the active rounding options (rounding_scope.h). This is the only place kernels meet dtypes, so
// every f32 kernel serves every dtype and the rounding is applied in exactly one way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "halfgrad/autograd/dtype.h"
#include "halfgrad/precision/rounding.h"

namespace hg::kernels {

// dst[i] = element (offset + i) of `src` (stored as `dtype`) widened to f32, for i < n.
void load_f32(float* dst, const void* src, DType dtype, int64_t offset, int64_t n);

// Element (offset + i) of `dst` (stored as `dtype`) = src[i] rounded once, for i < n.
// `stochastic_index` numbers the rounding events for stochastic rounding (ignored otherwise).
// While a CastObserver is installed (halfgrad/autograd/cast_observer.h), a rounding to f16/bf16 also
// reports what it did to the observer.
void store_rounded(void* dst, DType dtype, int64_t offset, const float* src, int64_t n,
                   const precision::RoundingOptions& rounding, uint64_t seed, uint64_t stochastic_index);

// True when all n elements of `data` (stored as `dtype`) are finite. Judged on the stored bits,
// without widening: in f32, f16 and bf16 alike an all-ones exponent field is inf or NaN. One
// pass that the compiler vectorises; anomaly mode runs it on every op's output.
bool all_finite(const void* data, DType dtype, int64_t n);

}  // namespace hg::kernels
