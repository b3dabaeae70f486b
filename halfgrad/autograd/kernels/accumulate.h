// f16 accumulation: sums kept in an f16 accumulator that is rounded after every addition, as
// FP16 multiply-add pipelines and early tensor cores without f32 accumulation computed them.
// halfgrad accumulates every sum in f32 (gemm.h, rows.h); Micikevicius et al. (2018, "Mixed
// Precision Training") name that as one of the three techniques mixed precision needs, and these
// kernels let a run switch it off (Autocast's Accumulation, --accumulate) to see why.
//
// Semantics, exactly (u = 2^-11, RN16 = round to nearest even into f16, with gradual underflow
// and overflow to inf; RN32 the same into f32):
//   kF16         acc <- RN16(acc + t_k) for k = 0, 1, ..., K-1 in increasing k, from acc = 0
//                (or from RN16(C) when a GEMM accumulates into C); the sum is the final acc.
//                One rounding per addition: RN16 of the exact acc + t_k, never RN16(RN32(acc +
//                t_k)), which can differ (a double rounding).
//   kF16Blocked  the kF16 chain restarted from 0 every kF16AccumulationBlock terms; each
//                block's f16 result is added to an f32 carry, carry <- RN32(carry + acc), from
//                carry = 0 (or C); the sum is the carry.
// The terms t_k: a GEMM's products RN32(a_ik b_kj) (exact when both factors are f16 or bf16: at
// most 11 x 11 significant bits, within f32's range), a reduction's elements as f32 values.
// The rounding ignores the RoundingScope (the accumulator is not an op's output); the caller
// rounds the sum into its output dtype once, as for f32 sums.
//
// How one step is rounded once: s = RN32(acc + t) and e = acc + t - s exactly
// (Knuth's TwoSum; exact in f32 because |acc| <= 65504 and f32 has gradual underflow). s is then
// replaced by the exact sum rounded to odd in f32 (s if e = 0; else whichever of s and its
// neighbour towards e has an odd significand), and that is rounded to f16. Rounding to odd at
// p + 2 or more bits followed by round-to-nearest at p bits equals one round-to-nearest of the
// exact value (Boldo & Melquiond 2008, "Emulation of FMA and correctly rounded sums: proved
// algorithms using rounding to odd", Theorem 1); f32 keeps 24 bits, f16 11, and f32's exponent
// range covers f16's subnormals and its overflow threshold 65520 (an f32 number). Non-finite s
// (an inf or NaN term, or an f32 overflow, which overflows f16 too) is rounded as is.
// tests/autograd/kernels/test_accumulate.cpp checks every kernel bit for bit against an oracle
// that rounds each exact sum once (halfgrad/precision/arithmetic.h's fma_bits for f16 products).
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
