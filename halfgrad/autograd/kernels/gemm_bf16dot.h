// gemm_bf16dot: the bf16 x bf16 GEMM on AVX512_BF16's VDPBF16PS (oneDNN's path for PyTorch's bf16
// autocast), gemm()'s engine when both operands are bf16, the sums f32, the CPU has the
// instruction and the exact path is not asked for (choose_gemm_engine, gemm.h). It visits k in
// pairs, odd member first, and flushes subnormals, so its bits differ from the exact path's. The
// instruction's steps, the order, the error bound and the switches: docs/numerics.md, "bf16 GEMMs
// on VDPBF16PS".
#pragma once

#include <cstdint>

#include "halfgrad/autograd/dtype.h"
#include "halfgrad/autograd/kernels/accumulate.h"
#include "halfgrad/autograd/kernels/gemm.h"

namespace hg::kernels {

// AVX512F and AVX512_BF16 usable on this CPU (CPUID and the OS's AVX-512 state), checked once.
bool cpu_has_bf16_dot();

// The mode in force for a product that asks for `requested` (GemmOptions::bf16_dot, from the
// run's MixedPrecisionOptions through Autocast): set_bf16_dot's when one is in force, else
// HALFGRAD_EXACT_BF16's when the variable is set (read once), else `requested`.
Bf16Dot bf16_dot_mode(Bf16Dot requested = Bf16Dot::kAuto);
// The mode a value of HALFGRAD_EXACT_BF16 selects: kExact for "1", kAuto for "0" or nullptr
// (unset); anything else is an hg::Error naming the variable.
Bf16Dot bf16_dot_from_environment(const char* value);
// Sets the mode for the whole process (gemm reads it on the calling thread, at its start).
void set_bf16_dot(Bf16Dot mode);

// Sets the mode for a scope and restores the previous setting (or the environment's) after it.
class ScopedBf16Dot {
 public:
  explicit ScopedBf16Dot(Bf16Dot mode);
  ~ScopedBf16Dot();
  ScopedBf16Dot(const ScopedBf16Dot&) = delete;
  ScopedBf16Dot& operator=(const ScopedBf16Dot&) = delete;

 private:
  int saved_;
};

// One VDPBF16PS step on one lane: acc + x y with x, y bf16 bit patterns, as the SDM defines it
// (subnormal x, y, acc read as zeros, one rounding to nearest even, a result tiny after rounding
// flushed to a zero of its sign).
float dpbf16_fma(float acc, uint16_t x, uint16_t y);

// Part `part` of `parts` of C(m,n) [+]= [bias +] op(A)(m,k) op(B)(k,n), A and B bf16, on `engine`
// (kBf16Dot or kBf16DotEmulated): the longer side of C, in register tiles, is cut into `parts`
// runs; each element's chain is the same whichever part computes it, and starts from C's old
// value (accumulate), bias[j] (bias: null or n values, gemm.h's GemmOptions) or 0. gemm
// (gemm.cpp) calls it per (matrix, part) task after validating the arguments; kBf16Dot on a CPU
// without the instruction is an hg::Error.
void gemm_bf16dot_part(GemmEngine engine, float* c, int64_t ldc, const GemmOperand& a, const GemmOperand& b, int64_t m,
                       int64_t n, int64_t k, bool accumulate, const float* bias, int64_t part, int64_t parts);

}  // namespace hg::kernels
