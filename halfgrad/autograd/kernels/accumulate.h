// f16 accumulation: sums kept in an f16 accumulator rounded after every addition (kF16), or in f16
// blocks carried in f32 (kF16Blocked), as FP16 pipelines without f32 accumulation computed them,
// so that a run can switch off the f32 sums mixed precision needs (Micikevicius et al. 2018) and
// see why. Each step is one rounding of the exact sum (TwoSum, then round-to-odd: Boldo and
// Melquiond 2008). Semantics and proof: docs/numerics.md, "Accumulation: f32, f16, f16-blocked".
#pragma once

#include <cstdint>

namespace hg::kernels {

enum class Accumulation { kF32, kF16, kF16Blocked };

// Which way a bf16 x bf16 product with f32 sums is summed (gemm_bf16dot.h): a request, which
// set_bf16_dot and the environment variable HALFGRAD_EXACT_BF16 override (bf16_dot_mode).
enum class Bf16Dot {
  kAuto,      // VDPBF16PS where the CPU has it, else the exact path (the default)
  kExact,     // gemm.h's f32 chain on every CPU (HALFGRAD_EXACT_BF16=1)
  kEmulated,  // VDPBF16PS's order and flushing computed in scalar code (dpbf16_fma) on any CPU,
              // through the same packing and loops: slow, for tests and for seeing on any
              // machine the bits an AVX512_BF16 machine computes
};

// The terms per f16 block of kF16Blocked (a run of 32 products per f32 carry update).
inline constexpr int64_t kF16AccumulationBlock = 32;

// C (M,N) = A (M,K) B (K,N) [+ C], every element one chain over k under `mode` (kF16 or
// kF16Blocked); A, B and C f32 row-major with row strides K, ldb >= N and ldc >= N. Rows run on
// threads in fixed groups, so no bit depends on the thread count. gemm() (gemm.h) widens and
// transposes its operands into this form when GemmOptions::accumulation asks for f16.
void gemm_f16(float* c, int64_t ldc, const float* a, const float* b, int64_t ldb, int64_t m, int64_t n, int64_t k,
              Accumulation mode, bool accumulate = false);
// x: (N, C) -> y: (N), y[i] = the sum of row i under `mode` (kF16 or kF16Blocked), j increasing.
void row_sums_f16(float* y, const float* x, int64_t n, int64_t c, Accumulation mode);
// x: (N, C) with row stride ld >= C -> y: (C), y[j] = the sum of column j under `mode` (kF16 or
// kF16Blocked), rows in increasing order.
void column_sums_f16(float* y, const float* x, int64_t n, int64_t c, int64_t ld, Accumulation mode);

}  // namespace hg::kernels
