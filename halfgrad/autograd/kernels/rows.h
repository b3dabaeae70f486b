// Row kernels: softmax, log_softmax and layer_norm forward and backward over the last dim, and the
// f32 sums every reduction uses, as Highway SIMD loops over rows of plain arrays (dynamic dispatch
// picks the target). Serial: the ops layer splits rows between threads. Every sum over a row has
// one fixed order, the same bits on every target; scalar twins: reference.h. The order, the f16
// accumulation modes and the accuracy against the twins: docs/autograd.md, "Row kernels".
// Shapes: x: (N, C) row-major, N rows of C elements. Outputs do not overlap inputs.
#pragma once

#include <cstdint>

#include "halfgrad/autograd/kernels/accumulate.h"

namespace hg::kernels {

// x: (N, C) -> y: (N, C), each row's softmax of z = x scale + bias (torch.softmax(x * scale +
// bias, -1), each operation rounded as written; bias: (C), shared by the N rows, or null). This
// is attention's softmax(q k^T / sqrt(D) + mask) without the scaled and masked scores ever
// stored: a key whose bias is -inf gets weight exactly 0. With scale = 1 and no bias the row is
// x itself. A row whose z is -inf everywhere gives zeros (torch: NaN), so a fully masked
// attention row cannot poison a batch; any NaN in z makes the row all NaN.
void softmax_forward(float* y, const float* x, int64_t n, int64_t c, float scale = 1.0f, const float* bias = nullptr,
                     Accumulation accumulation = Accumulation::kF32);
// dy, y: (N, C) -> dx: (N, C) = y (dy - sum_j dy_j y_j) scale, y the forward's output (the
// product with scale a separate rounding, skipped when scale = 1).
void softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c, float scale = 1.0f);

// x: (N, C) -> y: (N, C) = x - max - log(sum_j e^(x_j - max)) (torch.log_softmax(x, -1));
// an all -inf row gives NaN, as torch.
void log_softmax_forward(float* y, const float* x, int64_t n, int64_t c,
                         Accumulation accumulation = Accumulation::kF32);
// dy, y: (N, C) -> dx: (N, C) = dy - e^y sum_j dy_j, y the forward's output.
void log_softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c);

// x: (N, C), w, b: (C) or null (1 and 0) -> y: (N, C) = (x - mean) rstd w + b; saves mean,
// rstd: (N), rstd = 1 / sqrt(var + eps) with the biased variance (torch.nn.functional.layer_norm
// over the last dim; Ba et al. 2016, "Layer Normalization").
void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t n,
                        int64_t c, float eps, Accumulation accumulation = Accumulation::kF32);
// dy, x: (N, C), w: (C) or null, mean, rstd: (N) -> dx: (N, C) written, or skipped if null;
// dw += sum_rows dy xhat, db += sum_rows dy: (C), accumulated in row order, each may be null.
// dx = rstd (g - mean_j g_j - xhat mean_j(g_j xhat_j)), g = dy w, xhat = (x - mean) rstd.
void layer_norm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                         const float* mean, const float* rstd, int64_t n, int64_t c);

// x: (N, C) -> y: (N), y[i] = sum_j x[i, j] in lane order (kF32), or one f16 chain
// (accumulate.h's row_sums_f16).
void row_sums(float* y, const float* x, int64_t n, int64_t c, Accumulation accumulation = Accumulation::kF32);
// x: (N, C) with row stride ld >= C -> y: (C), y[j] = sum_i x[i, j]: rows summed in order in
// blocks of 256, the block sums added in order (error growth N/256 + 256).
void column_sums(float* y, const float* x, int64_t n, int64_t c, int64_t ld);

}  // namespace hg::kernels
