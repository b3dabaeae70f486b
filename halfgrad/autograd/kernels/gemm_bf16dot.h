// gemm_bf16dot: the bf16 x bf16 GEMM on AVX512_BF16's VDPBF16PS (Cooper Lake, Sapphire Rapids and
// later Xeons, AMD Zen 4 and later), which gemm() (gemm.h) runs instead of its exact f32 chain when
// both operands are bf16, the sums are f32 (Accumulation::kF32), the CPU has AVX512F + AVX512_BF16
// (checked at run time: the build has no -march) and the exact path is not requested. It does the
// work of two f32 FMAs per lane and instruction, with no widening while packing: oneDNN's path for
// PyTorch's bf16 autocast. The price is a different summation order and flushed subnormals, so its
// bits differ from the exact path's (docs/numerics.md, "bf16 GEMMs on VDPBF16PS").
//
// What the instruction computes, per the Intel SDM (VDPBF16PS page, "Operation"): each f32 lane of
// the accumulator takes a pair of bf16 values from each source, src1 = (x0, x1), src2 = (y0, y1)
// (element 0 in the low 16 bits), and does two f32 FMAs in this order, the odd (high) pair member
// first:  acc = acc + x1 y1;  acc = acc + x0 y0.  Each FMA rounds once to nearest even, treats
// subnormal inputs (the bf16 factors and the f32 accumulator) as zeros of their sign, and flushes
// a result that is tiny after rounding (rounded to 24 bits with an unbounded exponent, below
// 2^-126: x86's tininess rule, SDM Vol. 1, 11.5.2.5) to a zero of its sign, exact or not (the
// page: "output denormals are always flushed"); MXCSR is neither read nor written. That the
// accumulator is also read with DAZ, and the tininess rule, are our reading of the page (it
// does not single them out); the test on a CPU with the instruction checks both. dpbf16_fma
// below is that step in scalar code.
//
// The order of a GEMM element C(i,j) = c0 + sum_k a_ik b_kj (c0 = C's old value when accumulating,
// bias[j] with a bias, else 0): k runs in pairs (0,1), (2,3), ...; pair p adds a_i,2p+1 b_2p+1,j
// and then a_i,2p b_2p,j, each step dpbf16_fma; an odd K ends with a pair whose odd member is a
// zero pad (+0 x +0, which leaves acc unchanged except that -0 becomes +0). So the chain visits
// k = 1, 0, 3, 2, 5, 4, ..., where the exact path visits 0, 1, 2, 3, ... with plain IEEE FMAs.
//
// Error against the exact path g (gemm.h's chain, the same exact products t_k = a_k b_k: a bf16
// product has at most 16 significant bits and fits f32): both are chains of K once-rounded
// additions of the same terms, so each is within gamma_K S of the exact sum (Higham, Accuracy and
// Stability, 4.2; gamma_K = K u / (1 - K u), u = 2^-24, S = |c0| + sum_k |t_k|). Flushing adds at
// most 2^-126 per step (a flushed result was below 2^-126), a subnormal c0 read as zero at most
// 2^-126 more, and a term with a subnormal bf16 factor is dropped whole (D = the sum of those |t_k|).
// Hence, for the result d of this kernel,
//   |d - g| <= 2 gamma_K S + D + (K + 2) 2^-125
// (2^-125: twice the flushing term, which covers g's own underflow errors of at most 2^-150 a step
// and the (1 + gamma_K) growth of early absolute errors). With no subnormals in sight that is
// 2 gamma_K S, about twice the exact path's own bound; tests/autograd/kernels/test_gemm_bf16dot.cpp
// checks it on random data. inf and NaN propagate as in IEEE arithmetic (which NaN's payload
// survives is not part of the contract).
//
// The exact path stays selectable: a run's MixedPrecisionOptions::bf16_dot (--bf16-dot exact,
// carried to each GEMM by the Autocast guard as GemmOptions::bf16_dot); HALFGRAD_EXACT_BF16 in
// the environment overrides it (read once, at the first GEMM; "1": exact, "0": the instruction
// where available; other values: hg::Error naming the variable); set_bf16_dot / ScopedBf16Dot
// from code take precedence over both. The bit-exact claims of the emulation model
// (docs/numerics.md) hold on the exact path.
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
