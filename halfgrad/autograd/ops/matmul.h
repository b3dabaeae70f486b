// Matrix products: accumulate in f32 whatever the input dtypes (as tensor cores do) and round
// the output once. Autocast policy kLowerPrecision. Backward uses the transposed GEMM
// variants, so no transpose is ever materialised.
#pragma once

#include <vector>

#include "halfgrad/autograd/tensor.h"

namespace hg {

// a: (M, K) or (..., M, K); b: (K, N) or (..., K, N) with the same leading dims (a 2-D b is
// shared by every batch). -> (..., M, N)
Tensor matmul(const Tensor& a, const Tensor& b);
// a @ b^T over the last two dims without materialising the transpose: a: (..., M, K),
// b: (..., N, K) or (N, K) -> (..., M, N). Attention's q k^T.
Tensor matmul_transposed(const Tensor& a, const Tensor& b);
// Attention's two products per (batch, head) on the (B, T, H*D) layout the projections produce
// and the output projection reads (head h of a token is columns [h*D, (h+1)*D)): each product
// reads its head's (T, D) slice where it is stored, so the heads are never copied out into
// (B, H, T, D) and back. Bit for bit what permuting to (B, H, T, D) and matmul_transposed /
// matmul give (every element the same GEMM chain), forward and backward.
// key_lengths (empty, or one per batch element, b's keys being its first key_lengths[b]): the
// keys after them are padding, masked out of the softmax between the two products, and skipped:
// their score columns are 0 instead of q k^T, and p's columns there are taken as 0. The real
// keys' results are the same bits (each element's GEMM chain loses only terms that are +-0 and
// leave it unchanged), and the backward is that of the bounded products (0 for the skipped keys'
// rows of dk and dv and columns of dp). A padded batch of words: half the keys or fewer.
// q: (B, Tq, H*D), k: (B, Tk, H*D) -> (B, H, Tq, Tk): q_h k_h^T, the scores.
Tensor matmul_heads_transposed(const Tensor& q, const Tensor& k, int64_t heads,
                               const std::vector<int64_t>& key_lengths = {});
// p: (B, H, Tq, Tk), v: (B, Tk, H*D) -> (B, Tq, H*D), head h's columns = p_h v_h: the context.
Tensor matmul_heads(const Tensor& p, const Tensor& v, const std::vector<int64_t>& key_lengths = {});
// x: (..., in), weight: (out, in), bias: (out) or undefined -> (..., out) = x W^T + b
// (torch.nn.functional.linear).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace hg
