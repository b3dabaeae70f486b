// The fused ops a transformer needs, each with a hand-written backward: softmax,
// log_softmax, layer_norm, dropout, embedding, cross_entropy, scaled dot-product attention
// and masked mean pooling. All compute in f32 inside; losses return f32, and under autocast the
// normalizations (softmax, log_softmax, layer_norm) store f32 or their input's dtype as the guard
// says (autocast.h, kNormalization).
#pragma once

#include "halfgrad/autograd/generator.h"
#include "halfgrad/autograd/indices.h"
#include "halfgrad/autograd/tensor.h"

namespace hg {

// Over the last dim. Output dtype = input dtype, except under an autocast guard with f32
// normalization outputs (torch.autocast's behaviour, the default): f32.
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);

// Attention's softmax(x scale + mask) over the last dim, fused: the scaled and masked scores are
// never stored. x: (B, H, T, C); masked: 1 where a key is masked, of shape (B, 1, 1, C) (a key
// mask for every head and query) or (B, 1, T, C) (per query, e.g. causal), or empty for none. A
// masked key gets weight exactly 0 (torch's -inf mask); a row with every key masked gives zeros.
// Backward: dx = y (dy - sum_j dy_j y_j) scale. Autocast: as softmax.
Tensor scaled_masked_softmax(const Tensor& x, float scale, const Indices& masked);

// x: (..., C), weight, bias: (C) (either may be undefined) -> (..., C); saves mean and
// 1/std per row. torch.nn.functional.layer_norm over the last dim.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);

// Zeroes each element with probability p and scales the rest by 1/(1-p) when training;
// identity otherwise. The mask comes from `gen`, so runs are reproducible.
Tensor dropout(const Tensor& x, float p, Generator& gen, bool training = true);

// ids: any shape S with values in [0, V); weight: (V, C) -> S + (C). Backward scatter-adds
// rows into the weight's gradient (in f32, in position order, rounded once to the weight's
// dtype); rows of padding_idx (if >= 0) get no gradient. With sparse, the gradient is row-sparse
// (sparse_rows.h): the rows the ids touched, each with the dense gradient's values.
// torch.nn.functional.embedding(ids, weight, padding_idx, sparse=sparse).
Tensor embedding(const Indices& ids, const Tensor& weight, int32_t padding_idx = -1, bool sparse = false);

struct CrossEntropyOptions {
  int32_t ignore_index = -100;  // targets equal to it contribute neither loss nor gradient
  float label_smoothing = 0.0f;
};
// logits: (N, K), targets: (N) -> mean loss over non-ignored rows, shape (), f32.
// torch.nn.functional.cross_entropy(reduction='mean').
Tensor cross_entropy(const Tensor& logits, const Indices& targets, const CrossEntropyOptions& options = {});

// q, k, v: (B, H, T, D); attention_mask: (B, T) with 1 for real keys and 0 for padding (the
// Hugging Face convention, the same mask masked_mean takes), or empty for none; causal:
// position t attends to keys <= t. softmax(q k^T / sqrt(D) + mask) v -> (B, H, T, D).
// The two products are autocast's lower-precision ops; the softmax computes in f32.
// dropout_p > 0 drops attention probabilities with `gen` (as nn.MultiheadAttention(dropout=p)).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Indices& attention_mask = {}, bool causal = false, float dropout_p = 0.0f,
                                    Generator* gen = nullptr);
// The same attention on the layout the projections produce: q, k, v: (B, T, H*D), head h of a
// token in columns [h*D, (h+1)*D) -> (B, T, H*D), the layout the output projection reads.
// Bit for bit scaled_dot_product_attention of the (B, H, T, D) permutations, permuted back, without
// the copies: the products read and write each head in place (matmul_heads, matmul.h).
Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                            const Indices& attention_mask = {}, bool causal = false, float dropout_p = 0.0f,
                            Generator* gen = nullptr);

// x: (B, T, C), mask: (B, T) with 1 for real tokens -> (B, C): the mean over real tokens.
Tensor masked_mean(const Tensor& x, const Indices& mask);

}  // namespace hg
