// Matrix products: accumulate in f32 whatever the input dtypes (as tensor cores do) and round
// the output once. Autocast policy kLowerPrecision. Backward uses the transposed GEMM
// variants, so no transpose is ever materialised.
#pragma once

#include "autograd/tensor.h"

namespace hg {

// a: (M, K) or (..., M, K); b: (K, N) or (..., K, N) with the same leading dims (a 2-D b is
// shared by every batch). -> (..., M, N)
Tensor matmul(const Tensor& a, const Tensor& b);
// a @ b^T over the last two dims without materialising the transpose: a: (..., M, K),
// b: (..., N, K) or (N, K) -> (..., M, N). Attention's q k^T.
Tensor matmul_transposed(const Tensor& a, const Tensor& b);
// x: (..., in), weight: (out, in), bias: (out) or undefined -> (..., out) = x W^T + b
// (torch.nn.functional.linear).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace hg
