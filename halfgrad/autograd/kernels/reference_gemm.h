// reference_gemm: the scalar twin of gemm.h, a naive triple loop and the tests' oracle.
// Same arguments and meaning as gemm; inputs are widened exactly (the same stored
// values the fast kernel sees) and summed in double, so it is slow and nearly exact, not bitwise
// equal to gemm: only the summation order and its rounding differ.
#pragma once

#include <cstdint>

#include "halfgrad/autograd/kernels/gemm.h"

namespace hg::kernels {

// C(M,N) = [bias +] op(A)(M,K) op(B)(K,N) [+ C] for each matrix of options.batch: each element
// summed in double, rounded once to f32; then the output_scale epilogue in f32, as gemm rounds it.
void reference_gemm(float* c, int64_t ldc, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n, int64_t k,
                    GemmOptions options = {});

}  // namespace hg::kernels
