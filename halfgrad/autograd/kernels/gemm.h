// gemm: the matrix product every layer trains on. C (f32) = [bias +] op(A) op(B) [+ C], where A
// and B are f32, f16 or bf16 (independently), each read as stored or transposed, never copied to
// transpose.
// Packed and cache-blocked (GotoBLAS/BLIS: Goto & van de Geijn 2008, "Anatomy of high-performance
// matrix multiplication"), Highway micro-kernels, OpenMP over blocks of C. Rounding the f32 result
// to a narrow output dtype is the caller's job (once, when storing). reference_gemm.h is the twin.
#pragma once

#include <cstdint>
#include <optional>

#include "halfgrad/autograd/dtype.h"
#include "halfgrad/autograd/kernels/accumulate.h"

namespace hg::kernels {

// One input of a product: a stored row-major matrix read as itself or as its transpose.
// Element (r, c) of the stored matrix is at data[r * ld + c] (in units of the dtype's width).
// op(X) = X, or X^T when `transposed`: for C(M,N) = op(A)(M,K) op(B)(K,N) the stored A is (M,K),
// or (K,M) if transposed; the stored B is (K,N), or (N,K) if transposed (as y = x W^T reads
// a Linear weight W (out,in)). ld may exceed the stored width: sub-matrix views are fine.
struct GemmOperand {
  const void* data = nullptr;  // f32: float; f16/bf16: uint16_t bit patterns
  DType dtype = DType::f32;
  int64_t ld = 0;  // elements between consecutive stored rows
  bool transposed = false;
  int64_t batch_stride = 0;  // a batch only (GemmOptions::batch): elements from one matrix to the next
                             // (0 reuses one matrix for the whole batch)

  // Matrix i of a batch: data advanced by i * batch_stride elements.
  GemmOperand member(int64_t i) const {
    GemmOperand m = *this;
    m.data = static_cast<const char*>(data) + i * batch_stride * static_cast<int64_t>(element_size(dtype));
    return m;
  }
};

struct GemmOptions {
  bool accumulate = false;  // C += op(A) op(B), as weight gradients need; false: C = op(A) op(B)
  // kF32: the packed kernel and the order below. kF16, kF16Blocked: every element one f16 chain
  // as accumulate.h defines (operands widened, then accumulate.h's gemm_f16).
  Accumulation accumulation = Accumulation::kF32;
  // bf16 x bf16 with kF32 sums: the requested summation (gemm_bf16dot.h; bf16_dot_mode applies
  // the overrides).
  Bf16Dot bf16_dot = Bf16Dot::kAuto;
  // C = bias + op(A) op(B), as a Linear layer's forward needs: bias (f32, n values, one per
  // column of C, shared by every matrix of a batch) is where each element's chain starts instead
  // of 0. The bits equal C filled with the bias rows and then accumulated into, without that pass
  // over C. Not together with accumulate (an hg::Error).
  const float* bias = nullptr;
  // The epilogue of a GEMM on scaled operands (fp8: output_scale = scale_inv_a * scale_inv_b, as
  // cuBLASLt's alpha and bias epilogue run TE's fp8 GEMMs): when output_scale is set, each finished
  // f32 element is multiplied by it (one rounding), then output_bias[j] is added if given (one
  // rounding; n values, shared by a batch). Not with accumulate or bias (an hg::Error).
  std::optional<float> output_scale;
  const float* output_bias = nullptr;
  // `batch` independent products C_i = op(A_i) op(B_i) (attention: one per batch and head), A_i at
  // a.data + i * a.batch_stride, likewise B_i, and C_i at c + i * c_batch_stride; one bias and one
  // epilogue for all. Reference: cublasSgemmStridedBatched, torch.bmm.
  int64_t batch = 1;
  int64_t c_batch_stride = 0;
};

// The one GEMM entry point: C(M,N) = [bias +] op(A)(M,K) op(B)(K,N) [+ C], C f32 row-major with
// row stride ldc; with an output_scale, C = output_scale * (op(A) op(B)) [+ output_bias]; for each
// matrix of options.batch. The accumulation, the bf16 dot and the epilogue are options too.
// Summation order, fixed: every C element is one sequential f32 chain over k = 0..K-1 of
// acc = acc + a_ik * b_kj, starting from C's old value (accumulate), bias[j] (bias) or 0; the
// multiply-add is fused (one rounding) on targets with FMA (AVX2, AVX-512) and rounded twice on
// SSE4 and scalar.
// So on a given target the bits do not depend on the thread count, the blocking, sub-matrix views
// or batching. K = 0 gives C = 0 (or C unchanged, or C = the bias rows).
// The exception: when A and B are both bf16 (f32 sums), a CPU with AVX512_BF16 runs VDPBF16PS,
// which visits k in pairs, odd member first, and flushes subnormals (gemm_bf16dot.h: the order,
// the error bound against this chain, and the switch back to it, HALFGRAD_EXACT_BF16=1).
// NaN and inf propagate as IEEE arithmetic says. C must not overlap A or B. Throws hg::Error for
// negative sizes, a null operand, a leading dimension below the stored width, a bias with
// accumulate, or an output_scale with either.
// Reference: BLAS sgemm with alpha = 1, beta = 0 (or 1 when accumulating); with a bias, addmm.
void gemm(float* c, int64_t ldc, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n, int64_t k,
          GemmOptions options = {});

// The engine gemm runs a product on, a pure function of the operands' dtypes, the options' sums
// and bf16 mode (after bf16_dot_mode's overrides) and the CPU (tested on every CPU):
// kPacked: the packed f32 kernel and the order above (every dtype pair, f32 sums);
// kF16Chains: accumulate.h's f16 chains (kF16, kF16Blocked; operands widened, any dtypes);
// kBf16Dot, kBf16DotEmulated: gemm_bf16dot.h's VDPBF16PS order, on the instruction or emulated
// (both operands bf16, f32 sums; the instruction also needs a CPU that has it).
enum class GemmEngine { kPacked, kF16Chains, kBf16Dot, kBf16DotEmulated };
GemmEngine choose_gemm_engine(DType a, DType b, Accumulation accumulation, Bf16Dot mode, bool cpu_has_bf16_dot);

}  // namespace hg::kernels
