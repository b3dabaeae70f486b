// The transformer's fused ops, each forward followed by its backward. Row-wise math runs in
// the f32 row kernels (halfgrad/autograd/kernels/rows.h) on blocks of widened rows (ops/map.h) and rounds
// once; cross-row sums (layer_norm's weight gradients) are summed per fixed row block and the
// block sums combined in block order, so results do not depend on the thread count.
#include "halfgrad/autograd/ops/nn.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "halfgrad/autograd/allocator.h"
#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/kernels/accumulate.h"
#include "halfgrad/autograd/kernels/elementwise.h"
#include "halfgrad/autograd/kernels/rows.h"
#include "halfgrad/autograd/ops/elementwise.h"
#include "halfgrad/autograd/ops/map.h"
#include "halfgrad/autograd/ops/matmul.h"
#include "halfgrad/autograd/ops/reduce.h"
#include "halfgrad/autograd/ops/shape_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"

namespace hg {

using detail::map_rows;
using detail::RowBlock;
template <size_t K>
using Rows = std::array<const float*, K>;

namespace {

int64_t last_dim(const Tensor& x, const char* op) {
  check(x.ndim() >= 1, op, ": needs at least 1 dim, got a scalar");
  return x.shape()[-1];
}

// The mask of an attention softmax as additive rows of C values, 0 or -inf: for scores
// (B, H, T, C), row (b, h, i) adds row b (a key mask, `per_query` false) or row b * T + i.
// widths[r]: mask row r's columns up to its last unmasked one (a padded batch's real keys). The
// columns after it are -inf, so their softmax is exactly 0 and the kernels' sums (a fixed lane per
// element, rows.h) are the same without them: the rows are computed over widths[r] columns and
// the rest filled with 0 -- the same bits (a masked column's gradient y (dy - dot) is a zero
// whose sign may differ): on a batch of words (1-128 tokens, padded to the longest) 45% of the work.
struct SoftmaxBias {
  std::vector<float> values;  // empty: no mask
  std::vector<int64_t> widths;
  int64_t rows_per_batch = 1, t = 1;
  bool per_query = false;
};

// fn(out_offset, run, mask_row) over the runs of consecutive rows of [first, first + count) that
// add the same bias row: one row per query, or to the end of the batch for a key mask.
template <class F>
void for_bias_runs(const SoftmaxBias& bias, int64_t first, int64_t count, int64_t c, const F& fn) {
  for (int64_t row = first, end = first + count; row < end;) {
    const int64_t batch = row / bias.rows_per_batch;
    const int64_t mask_row = bias.per_query ? batch * bias.t + row % bias.t : batch;
    const int64_t run = bias.per_query ? 1 : std::min(end, (batch + 1) * bias.rows_per_batch) - row;
    fn((row - first) * c, run, mask_row);
    row += run;
  }
}

// rows(out, in..., n, width) over `run` rows of c columns, as width-column rows with the rest of
// each row set to 0: one call when width == c, else one per row.
template <class F, class... In>
void rows_of_width(float* out, int64_t run, int64_t c, int64_t width, const F& rows, const In*... in) {
  if (width == c) {
    rows(out, in..., run, c);
    return;
  }
  for (int64_t r = 0; r < run; ++r) {
    rows(out + r * c, (in + r * c)..., 1, width);
    std::fill(out + r * c + width, out + (r + 1) * c, 0.0f);
  }
}

// softmax(x scale + bias) over the last dim, rounded once.
Tensor fused_softmax(const Tensor& x0, float scale, const SoftmaxBias& bias) {
  const Tensor x = autocast_input(x0, autocast_dtype(CastPolicy::kNormalization, {x0}));
  const int64_t c = last_dim(x, "softmax");
  const Accumulation mode = active_accumulation();
  Tensor y = map_rows<1>(x.shape(), x.dtype(), {x}, [&](float* out, const Rows<1>& in, RowBlock block) {
    if (bias.values.empty()) return kernels::softmax_forward(out, in[0], block.count, c, scale, nullptr, mode);
    for_bias_runs(bias, block.first, block.count, c, [&](int64_t offset, int64_t run, int64_t mask_row) {
      const float* bias_row = &bias.values[size_t(mask_row * c)];
      rows_of_width(
          out + offset, run, c, bias.widths[size_t(mask_row)],
          [&](float* o, const float* i, int64_t n, int64_t width) {
            kernels::softmax_forward(o, i, n, width, scale, bias_row, mode);
          },
          in[0] + offset);
    });
  });
  const Tensor saved = y.detach();
  return record("softmax", y, {x}, [x, saved, c, scale, bias](const Tensor& dy) {
    // dx = y * (dy - sum_j dy_j y_j) * scale; masked keys have y = 0, so their dx is 0.
    accumulate_grad(
        x, map_rows<2>(x.shape(), dy.dtype(), {dy, saved}, [&](float* out, const Rows<2>& in, RowBlock block) {
          if (bias.values.empty()) {
            kernels::softmax_backward(out, in[0], in[1], block.count, c, scale);
            return;
          }
          for_bias_runs(bias, block.first, block.count, c, [&](int64_t offset, int64_t run, int64_t mask_row) {
            rows_of_width(
                out + offset, run, c, bias.widths[size_t(mask_row)],
                [&](float* o, const float* g, const float* p, int64_t n, int64_t width) {
                  kernels::softmax_backward(o, g, p, n, width, scale);
                },
                in[0] + offset, in[1] + offset);
          });
        }));
  });
}

}  // namespace

// A row that is -inf everywhere gives zeros instead of torch's NaN (kernels::softmax_forward).
Tensor softmax(const Tensor& x) { return fused_softmax(x, 1.0f, {}); }

Tensor scaled_masked_softmax(const Tensor& x, float scale, const Indices& masked) {
  check(x.ndim() == 4, "scaled_masked_softmax: scores must be (B, H, T, C), got ", x.shape());
  const int64_t b = x.shape()[0], h = x.shape()[1], t = x.shape()[2], c = x.shape()[3];
  SoftmaxBias bias{.rows_per_batch = h * t, .t = t, .per_query = masked.shape == Shape{b, 1, t, c}};
  if (masked.numel() > 0) {
    check(bias.per_query || masked.shape == Shape{b, 1, 1, c}, "scaled_masked_softmax: mask of shape ", masked.shape,
          " for scores ", x.shape(), " (needs (B, 1, 1, C) or (B, 1, T, C))");
    bias.values.resize(size_t(masked.numel()));
    bias.widths.assign(size_t(masked.numel() / c), 0);
    for (size_t i = 0; i < bias.values.size(); ++i) {
      const bool off = masked[int64_t(i)] != 0;
      bias.values[i] = off ? -std::numeric_limits<float>::infinity() : 0.0f;
      if (!off) bias.widths[i / size_t(c)] = int64_t(i % size_t(c)) + 1;
    }
  }
  return fused_softmax(x, scale, bias);
}

Tensor log_softmax(const Tensor& x0) {
  const Tensor x = autocast_input(x0, autocast_dtype(CastPolicy::kNormalization, {x0}));
  const int64_t c = last_dim(x, "log_softmax");
  const Accumulation mode = active_accumulation();
  Tensor y = map_rows<1>(x.shape(), x.dtype(), {x}, [c, mode](float* out, const Rows<1>& in, RowBlock block) {
    kernels::log_softmax_forward(out, in[0], block.count, c, mode);
  });
  const Tensor saved = y.detach();
  return record("log_softmax", y, {x}, [x, saved, c](const Tensor& dy) {
    // dx = dy - exp(y) * sum_j dy_j
    accumulate_grad(x,
                    map_rows<2>(x.shape(), dy.dtype(), {dy, saved}, [c](float* out, const Rows<2>& in, RowBlock block) {
                      kernels::log_softmax_backward(out, in[0], in[1], block.count, c);
                    }));
  });
}

Tensor layer_norm(const Tensor& x0, const Tensor& weight0, const Tensor& bias0, float eps) {
  const DType dtype = autocast_dtype(CastPolicy::kNormalization, {x0, weight0, bias0});
  const Tensor x = autocast_input(x0, dtype);
  const Tensor weight = weight0.defined() ? autocast_input(weight0, dtype) : Tensor();
  const Tensor bias = bias0.defined() ? autocast_input(bias0, dtype) : Tensor();
  const int64_t c = last_dim(x, "layer_norm");
  for (const Tensor* p : {&weight, &bias}) {
    check(!p->defined() || (p->ndim() == 1 && p->shape()[0] == c), "layer_norm: parameter of shape ",
          p->defined() ? p->shape() : Shape(), " for input ", x.shape());
  }
  const int64_t rows = c ? x.numel() / c : 0;
  // The parameters widened once (C elements each); empty when undefined (the kernel's null).
  const auto widened = [](const Tensor& t) { return t.defined() ? t.to_vector() : std::vector<float>(); };
  const std::vector<float> w = widened(weight), b = widened(bias);
  const float* const w_ptr = w.empty() ? nullptr : w.data();
  const float* const b_ptr = b.empty() ? nullptr : b.data();
  // Saved per row for backward: mean and 1/sqrt(var + eps) (biased variance, as torch).
  auto mean = std::make_shared<std::vector<float>>(size_t(rows));
  auto rstd = std::make_shared<std::vector<float>>(size_t(rows));
  const Accumulation mode = active_accumulation();
  Tensor y = map_rows<1>(x.shape(), x.dtype(), {x}, [&](float* out, const Rows<1>& in, RowBlock block) {
    kernels::layer_norm_forward(out, mean->data() + block.first, rstd->data() + block.first, in[0], w_ptr, b_ptr,
                                block.count, c, eps, mode);
  });
  return record("layer_norm", y, {x, weight, bias}, [x, weight, bias, mean, rstd, w, c, rows](const Tensor& dy) {
    const float* const w_ptr = w.empty() ? nullptr : w.data();
    const bool need_dw = weight.defined() && weight.requires_grad();
    const bool need_db = bias.defined() && bias.requires_grad();
    // dw and db: each row block accumulates its own partial sums (in row order), then the
    // partials are summed in block order.
    const int64_t blocks = detail::row_blocks(rows, c);
    std::vector<float> partial_w(need_dw ? size_t(blocks * c) : 0, 0.0f),
        partial_b(need_db ? size_t(blocks * c) : 0, 0.0f);
    const auto kernel = [&](float* dx, const Rows<2>& in, RowBlock block) {
      kernels::layer_norm_backward(dx, need_dw ? &partial_w[size_t(block.index * c)] : nullptr,
                                   need_db ? &partial_b[size_t(block.index * c)] : nullptr, in[0], in[1], w_ptr,
                                   mean->data() + block.first, rstd->data() + block.first, block.count, c);
    };
    if (x.requires_grad()) {
      // dx = rstd * (g w - mean(g w) - xhat * mean(g w xhat)), xhat = (x - mean) rstd.
      accumulate_grad(x, map_rows<2>(x.shape(), dy.dtype(), {dy, x}, kernel));
    } else if (need_dw || need_db) {
      detail::for_rows<2>({dy, x}, rows, c, false,
                          [&](const Rows<2>& in, RowBlock block, float*) { kernel(nullptr, in, block); });
    }
    const auto sum_blocks_into = [&](const std::vector<float>& partial, const Tensor& param) {
      std::vector<float> total(static_cast<size_t>(c));
      kernels::column_sums(total.data(), partial.data(), blocks, c, c);
      accumulate_grad(param, Tensor::from_vector(total, param.shape(), DType::f32));
    };
    if (need_dw) sum_blocks_into(partial_w, weight);
    if (need_db) sum_blocks_into(partial_b, bias);
  });
}

Tensor dropout(const Tensor& x, float p, Generator& gen, bool training) {
  check(p >= 0.0f && p < 1.0f, "dropout: p must be in [0, 1), got ", p);
  if (!training || p == 0.0f) return x;
  // Element i is kept when the uniform of counter first + i is >= p, and then scaled by 1/(1-p)
  // in f32 (not rounded). Each chunk draws its own counters, so the uniforms are never stored;
  // the keep bytes are saved for the backward (a quarter of an f32 mask).
  const uint64_t first = gen.offset();
  gen.skip(uint64_t(x.numel()));
  const std::shared_ptr<std::byte> keep = allocate_storage(size_t(x.numel()));
  auto* kept = reinterpret_cast<uint8_t*>(keep.get());
  const float scale = 1.0f / (1.0f - p);
  const auto apply = [kept, scale](float* out, const float* in, int64_t n, int64_t start) {
    alignas(64) float mask[detail::kChunk];
    const uint8_t* const k = kept + start;                          // a local pointer, so that the loop vectorizes
    for (int64_t i = 0; i < n; ++i) mask[i] = float(k[i]) * scale;  // branch-free: 0 or scale
    kernels::mul(out, in, mask, n);
  };
  Tensor y = detail::map<1>(x.shape(), x.dtype(), {x}, [&](float* out, const Rows<1>& in, int64_t n, int64_t start) {
    alignas(64) float u[detail::kChunk];
    gen.uniform_at({u, size_t(n)}, first + uint64_t(start));
    uint8_t* const k = kept + start;
    const float drop = p;
    for (int64_t i = 0; i < n; ++i) k[i] = u[i] >= drop;
    apply(out, in[0], n, start);
  });
  return record("dropout", y, {x}, [x, keep, apply](const Tensor& dy) {
    accumulate_grad(
        x, detail::map<1>(dy.shape(), dy.dtype(), {dy}, [&](float* out, const Rows<1>& in, int64_t n, int64_t start) {
          apply(out, in[0], n, start);
        }));
  });
}

namespace {

// The positions of `ids` (each in [0, v)) that are not padding_idx, ordered by id and, among
// equal ids, by position: std::stable_sort's order, by a least-significant-digit radix sort (11
// bits a pass, as many passes as ids below v have bits; each pass is stable). Per step of the
// main job that is two passes over 32K positions instead of a comparison sort (3.6% of its time).
std::vector<int64_t> positions_by_id(const Indices& ids, int32_t padding_idx, int64_t v) {
  std::vector<int64_t> order, next;
  order.reserve(size_t(ids.numel()));
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ids[i] != padding_idx) order.push_back(i);
  }
  constexpr int kBits = 11;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  const int bits = std::bit_width(uint64_t(std::max<int64_t>(v, 1) - 1));
  next.resize(order.size());
  for (int shift = 0; shift < bits; shift += kBits) {
    std::vector<size_t> start(size_t(kMask) + 2, 0);  // start[d + 1] counts digit d, then prefix sums
    for (const int64_t i : order) ++start[((uint32_t(ids[i]) >> shift) & kMask) + 1];
    for (size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
    for (const int64_t i : order) next[start[(uint32_t(ids[i]) >> shift) & kMask]++] = i;
    order.swap(next);
  }
  return order;
}

}  // namespace

Tensor embedding(const Indices& ids, const Tensor& weight, int32_t padding_idx, bool sparse) {
  check(weight.ndim() == 2, "embedding: weight must be (V, C), got ", weight.shape());
  const int64_t v = weight.shape()[0], c = weight.shape()[1];
  for (int64_t i = 0; i < ids.numel(); ++i) {
    check(ids[i] >= 0 && ids[i] < v, "embedding: id ", ids[i], " at position ", i, " is outside the vocabulary [0, ", v,
          ")");
  }
  check(ids.shape.ndim() < Shape::kMaxDims, "embedding: ids of shape ", ids.shape, " have too many dims");
  std::vector<int64_t> dims(ids.shape.dims().begin(), ids.shape.dims().end());
  dims.push_back(c);
  Tensor y = Tensor::empty(Shape(std::span<const int64_t>(dims)), weight.dtype());
  const size_t row_bytes = size_t(c) * element_size(weight.dtype());
  for (int64_t i = 0; i < ids.numel(); ++i) {  // a gather: exact copies, no rounding
    std::memcpy(y.bytes() + size_t(i) * row_bytes, weight.bytes() + size_t(ids[i]) * row_bytes, row_bytes);
  }
  return record("embedding", y, {weight}, [ids, weight, padding_idx, v, c, sparse](const Tensor& dy) {
    // Scatter-add rows of dy into dW in position order (f32), skipping padding_idx.
    if (sparse) {  // the same sums, for the touched rows only: positions sorted by id, stably
      const std::vector<int64_t> order = positions_by_id(ids, padding_idx, v);
      SparseRows dw;
      for (const int64_t i : order) {
        if (dw.rows.empty() || dw.rows.back() != ids[i]) dw.rows.push_back(ids[i]);
      }
      dw.values = Tensor::zeros({int64_t(dw.rows.size()), c});
      float* row = dw.values.data<float>() - c;
      // dy in f32: in place, or widened once (a decode call per position cost more than its rows).
      std::vector<float> widened;
      if (dy.dtype() != DType::f32) widened = dy.to_vector();
      const float* gy = dy.dtype() == DType::f32 ? dy.data<float>() : widened.data();
      for (size_t k = 0; k < order.size(); ++k) {
        const int64_t i = order[k];
        if (k == 0 || ids[order[k - 1]] != ids[i]) row += c;
        const float* g = gy + i * c;
        for (int64_t j = 0; j < c; ++j) row[j] += g[j];
      }
      accumulate_grad(weight, std::move(dw));
      return;
    }
    const std::vector<float> g = dy.to_vector();
    std::vector<float> dw(size_t(v * c), 0.0f);
    for (int64_t i = 0; i < ids.numel(); ++i) {
      if (ids[i] == padding_idx) continue;
      for (int64_t j = 0; j < c; ++j) dw[size_t(ids[i] * c + j)] += g[size_t(i * c + j)];
    }
    accumulate_grad(weight, Tensor::from_vector(dw, weight.shape()));
  });
}

Tensor cross_entropy(const Tensor& logits, const Indices& targets, const CrossEntropyOptions& options) {
  check(logits.ndim() == 2, "cross_entropy: logits must be (N, K), got ", logits.shape());
  const int64_t n = logits.shape()[0], k = logits.shape()[1];
  check(targets.numel() == n, "cross_entropy: ", targets.numel(), " targets for ", n, " rows of logits");
  const float eps = options.label_smoothing;
  check(eps >= 0.0f && eps <= 1.0f, "cross_entropy: label_smoothing must be in [0, 1], got ", eps);
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] == options.ignore_index) continue;
    check(targets[i] >= 0 && targets[i] < k, "cross_entropy: target ", targets[i], " in row ", i,
          " is not a class in [0, ", k, ")");
    ++counted;
  }
  // Row losses in f32: -(1 - eps) logp[t] - eps/K sum_j logp[j] (torch's label smoothing).
  // Under f16 accumulation (inside an Autocast guard that asks for it) the log-softmax's sums,
  // the rows' sums of logp and the total over the rows are f16 chains.
  const Accumulation mode = active_accumulation();
  const std::vector<float> z = logits.to_vector();
  std::vector<float> logp(z.size()), sum_logp(static_cast<size_t>(n));
  std::vector<float> terms;  // the counted rows' losses, in row order
  kernels::log_softmax_forward(logp.data(), z.data(), n, k, mode);
  kernels::row_sums(sum_logp.data(), logp.data(), n, k, mode);
  float total = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] == options.ignore_index) continue;
    const float term = -(1.0f - eps) * logp[size_t(i * k + targets[i])] - eps / float(k) * sum_logp[size_t(i)];
    if (mode == Accumulation::kF32) {
      total += term;
    } else {
      terms.push_back(term);
    }
  }
  if (mode != Accumulation::kF32) kernels::row_sums(&total, terms.data(), 1, int64_t(terms.size()), mode);
  // torch returns NaN for a batch whose every target is ignored (0/0); so do we.
  const float loss = counted ? total / float(counted) : std::numeric_limits<float>::quiet_NaN();
  Tensor y = Tensor::full({}, loss, DType::f32);
  return record("cross_entropy", y, {logits}, [logits, targets, logp, n, k, eps, counted, options](const Tensor& dy) {
    // d loss / d z_ij = (softmax_ij - (1 - eps) [j = t_i] - eps/K) * dy / count
    const float scale = dy.item() / float(std::max<int64_t>(counted, 1));
    std::vector<float> dz(size_t(n * k), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      if (targets[i] == options.ignore_index) continue;
      float* row = &dz[size_t(i * k)];
      kernels::exp(row, &logp[size_t(i * k)], k);  // softmax
      for (int64_t j = 0; j < k; ++j) {
        const float target = (j == targets[i] ? 1.0f - eps : 0.0f) + eps / float(k);
        row[j] = (row[j] - target) * scale;
      }
    }
    accumulate_grad(logits, Tensor::from_vector(dz, logits.shape()));
  });
}

namespace {

// Attention's inputs checked (before any product) and its mask built, for scaled_masked_softmax:
// the scale and the mask are applied inside the softmax, so the scaled and masked (B, H, T, T)
// scores are never stored, and a masked key gets weight exactly 0, as torch's -inf masks give
// (Hugging Face fills torch.finfo(dtype).min instead: the same zeros whenever a row has one real
// key). A row with no key at all gives zeros, not NaN.
Indices attention_masked(const Indices& attention_mask, int64_t b, int64_t t, bool causal, float dropout_p,
                         const Generator* gen) {
  check(attention_mask.numel() == 0 || attention_mask.shape == Shape{b, t}, "attention: mask of shape ",
        attention_mask.shape, " for batch ", b, " and length ", t);
  check(dropout_p <= 0.0f || gen != nullptr, "attention: dropout_p > 0 needs a generator");
  const bool padded =
      std::find(attention_mask.values.begin(), attention_mask.values.end(), 0) != attention_mask.values.end();
  if (causal) {
    // masked[b, 0, i, j] = 1 where key j is padding or j > i.
    std::vector<int32_t> values(size_t(b * t * t), 0);
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j < t; ++j) {
          const bool pad = padded && attention_mask[bi * t + j] == 0;
          values[size_t((bi * t + i) * t + j)] = (pad || j > i) ? 1 : 0;
        }
      }
    }
    return Indices(std::move(values), {b, 1, t, t});
  }
  if (padded) {
    // masked[b, 0, 0, j] = 1 where key j is padding, for every head and query. Without padding
    // nothing is masked.
    std::vector<int32_t> values(size_t(b * t));
    for (int64_t i = 0; i < b * t; ++i) values[size_t(i)] = attention_mask[i] == 0 ? 1 : 0;
    return Indices(std::move(values), {b, 1, 1, t});
  }
  return {};
}

// The attention probabilities from the (B, H, T, T) scores q k^T: softmax(scores / sqrt(D) + mask),
// then dropout.
Tensor attention_probabilities(const Tensor& scores, int64_t d, const Indices& masked, float dropout_p,
                               Generator* gen) {
  Tensor probabilities = scaled_masked_softmax(scores, 1.0f / std::sqrt(float(d)), masked);
  return dropout_p > 0.0f ? dropout(probabilities, dropout_p, *gen) : probabilities;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Indices& attention_mask,
                                    bool causal, float dropout_p, Generator* gen) {
  check(q.ndim() == 4 && k.shape() == q.shape() && v.shape() == q.shape(),
        "attention: q, k, v must share one (B, H, T, D) shape, got ", q.shape(), ", ", k.shape(), ", ", v.shape());
  const int64_t b = q.shape()[0], t = q.shape()[2], d = q.shape()[3];
  const Indices masked = attention_masked(attention_mask, b, t, causal, dropout_p, gen);
  return matmul(attention_probabilities(matmul_transposed(q, k), d, masked, dropout_p, gen), v);
}

Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                            const Indices& attention_mask, bool causal, float dropout_p, Generator* gen) {
  check(q.ndim() == 3 && k.shape() == q.shape() && v.shape() == q.shape(),
        "attention: q, k, v must share one (B, T, H*D) shape, got ", q.shape(), ", ", k.shape(), ", ", v.shape());
  check(heads > 0 && q.shape()[2] % heads == 0, "attention: ", heads, " heads do not divide the ", q.shape()[2],
        " columns of q, k, v");
  const int64_t b = q.shape()[0], t = q.shape()[1], d = q.shape()[2] / heads;
  const Indices masked = attention_masked(attention_mask, b, t, causal, dropout_p, gen);
  // Each batch element's keys up to its last real one: the padding after it is skipped by both
  // products (matmul_heads_transposed's key_lengths: the same bits).
  std::vector<int64_t> key_lengths;
  if (masked.numel() > 0 && attention_mask.numel() > 0) {
    key_lengths.assign(size_t(b), 0);
    for (int64_t i = 0; i < b * t; ++i) {
      if (attention_mask[i] != 0) key_lengths[size_t(i / t)] = i % t + 1;
    }
  }
  const Tensor scores = matmul_heads_transposed(q, k, heads, key_lengths);
  return matmul_heads(attention_probabilities(scores, d, masked, dropout_p, gen), v, key_lengths);
}

Tensor masked_mean(const Tensor& x, const Indices& mask) {
  check(x.ndim() == 3 && mask.shape == Shape{x.shape()[0], x.shape()[1]}, "masked_mean: x ", x.shape(),
        " needs a (B, T) mask, got ", mask.shape);
  const int64_t b = x.shape()[0], t = x.shape()[1];
  std::vector<float> keep(static_cast<size_t>(b * t));
  std::vector<float> inv_count(static_cast<size_t>(b));
  for (int64_t bi = 0; bi < b; ++bi) {
    int64_t count = 0;
    for (int64_t ti = 0; ti < t; ++ti) {
      keep[size_t(bi * t + ti)] = mask[bi * t + ti] != 0 ? 1.0f : 0.0f;
      count += mask[bi * t + ti] != 0;
    }
    inv_count[size_t(bi)] = 1.0f / float(std::max<int64_t>(count, 1));
  }
  const Tensor summed = sum(mul(x, Tensor::from_vector(keep, {b, t, 1})), 1);  // (B, C)
  return mul(summed, Tensor::from_vector(inv_count, {b, 1}));
}

}  // namespace hg
