// Reductions over a dim viewed as (outer, D, inner): f32 sums in a fixed order (the row kernels'
// lane order along a contiguous dim, blocks of 256 along a strided one), or under f16
// accumulation (autocast.h) one f16 chain per result (kernels/accumulate.h); one rounding of each
// result. Backward broadcasts the gradient back (via ops/map.h). sum_to, the tape's reduction
// of broadcast gradients, is the same f32 sum over one or more runs of dims.
#include "halfgrad/autograd/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/kernels/accumulate.h"
#include "halfgrad/autograd/kernels/elementwise.h"
#include "halfgrad/autograd/kernels/rows.h"
#include "halfgrad/autograd/ops/map.h"
#include "halfgrad/autograd/rounding_scope.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"

namespace hg {
namespace {

struct Split {
  int64_t outer, d, inner;
};

Split split(const Shape& shape, int dim) {
  int64_t inner = 1;
  for (int i = dim + 1; i < shape.ndim(); ++i) inner *= shape[i];
  return {shape.outer(dim), shape[dim], inner};
}

// A contiguous dim longer than this is summed in pieces of this many elements (in parallel),
// and the pieces' sums are summed in order.
constexpr int64_t kSumPiece = 1 << 16;
// Columns per task of a strided sum, and the rows of column_sums' blocks (rows.h).
constexpr int64_t kColumnTile = 512;
constexpr int64_t kColumnBlock = 256;

// result (outer, inner) = sum over d of x viewed as (outer, d, inner) under f16 accumulation
// (kF16 or kF16Blocked): one chain per result, d increasing.
void sum_dim_f16(float* result, const Tensor& x, const Split& s, Accumulation accumulation) {
  if (s.inner == 1) {
    detail::for_rows<1>({x}, s.outer, s.d, false,
                        [&](const std::array<const float*, 1>& in, detail::RowBlock block, float*) {
                          kernels::row_sums_f16(result + block.first, in[0], block.count, s.d, accumulation);
                        });
    return;
  }
  const std::vector<float> widened = x.dtype() == DType::f32 ? std::vector<float>() : x.to_vector();
  const float* const data = x.dtype() == DType::f32 ? x.data<float>() : widened.data();
  for (int64_t o = 0; o < s.outer; ++o) {
    kernels::column_sums_f16(result + o * s.inner, data + o * s.d * s.inner, s.d, s.inner, s.inner, accumulation);
  }
}

// result (outer, inner) = sum over d of x viewed as (outer, d, inner), in f32, in an order fixed
// by the shape: f16/bf16 inputs give the same sums as their values widened to f32. Other
// accumulations: sum_dim_f16.
void sum_dim(float* result, const Tensor& x, const Split& s, Accumulation accumulation = Accumulation::kF32) {
  if (accumulation != Accumulation::kF32) {
    sum_dim_f16(result, x, s, accumulation);
    return;
  }
  const bool f32 = x.dtype() == DType::f32;
  const float* const data = f32 ? x.data<float>() : nullptr;
  const bool parallel = use_team(s.outer * s.d * s.inner, kParallelElements);
  if (s.inner == 1 && s.d <= kSumPiece) {  // rows: the lane order
    detail::for_rows<1>({x}, s.outer, s.d, false,
                        [&](const std::array<const float*, 1>& in, detail::RowBlock block, float*) {
                          kernels::row_sums(result + block.first, in[0], block.count, s.d);
                        });
  } else if (s.inner == 1) {  // long rows: pieces, then the pieces' sums
    const int64_t pieces = (s.d + kSumPiece - 1) / kSumPiece;
    std::vector<float> partial(size_t(s.outer * pieces));
    maybe_parallel(parallel, [&] {
      std::vector<float> buffer(f32 ? 0 : size_t(kSumPiece));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < s.outer * pieces; ++t) {
        const int64_t start = t / pieces * s.d + t % pieces * kSumPiece;
        const int64_t len = std::min(kSumPiece, s.d - t % pieces * kSumPiece);
        if (!f32) kernels::load_f32(buffer.data(), x.bytes(), x.dtype(), start, len);
        kernels::row_sums(&partial[size_t(t)], f32 ? data + start : buffer.data(), 1, len);
      }
    });
    kernels::row_sums(result, partial.data(), s.outer, pieces);
  } else {  // a strided dim: column sums of (d, inner) matrices, in tiles of columns
    const int64_t tiles = (s.inner + kColumnTile - 1) / kColumnTile;
    maybe_parallel(parallel && s.outer * tiles > 1, [&] {
      std::vector<float> buffer(f32 ? 0 : size_t(kColumnBlock * kColumnTile)), block_sum(f32 ? 0 : size_t(kColumnTile));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < s.outer * tiles; ++t) {
        const int64_t o = t / tiles, j0 = t % tiles * kColumnTile, width = std::min(kColumnTile, s.inner - j0);
        float* const out = result + o * s.inner + j0;
        const int64_t origin = o * s.d * s.inner + j0;
        if (f32) {
          kernels::column_sums(out, data + origin, s.d, width, s.inner);
          continue;
        }
        // Widened a block of column_sums' rows at a time; adding the block sums in order is
        // column_sums' own order.
        std::fill_n(out, width, 0.0f);
        for (int64_t r0 = 0; r0 < s.d; r0 += kColumnBlock) {
          const int64_t rows = std::min(kColumnBlock, s.d - r0);
          if (width == s.inner) {  // the block's rows are contiguous: one widening call, not one a row
            kernels::load_f32(buffer.data(), x.bytes(), x.dtype(), origin + r0 * s.inner, rows * width);
          } else {
            for (int64_t r = 0; r < rows; ++r) {
              kernels::load_f32(&buffer[size_t(r * width)], x.bytes(), x.dtype(), origin + (r0 + r) * s.inner, width);
            }
          }
          kernels::column_sums(block_sum.data(), buffer.data(), rows, width, width);
          kernels::add(out, out, block_sum.data(), width);
        }
      }
    });
  }
}

// y (shape) broadcast to `shape_out` in dtype, times `scale`: the backward of every reduction.
Tensor broadcast_to(const Tensor& y, const Shape& shape_out, DType dtype, float scale = 1.0f) {
  return detail::map<1>(shape_out, dtype, {y}, [scale](float* out, const std::array<const float*, 1>& in, int64_t n) {
    if (scale == 1.0f) {
      std::memcpy(out, in[0], size_t(n) * sizeof(float));
    } else {
      kernels::mul_scalar(out, in[0], scale, n);
    }
  });
}

Tensor reduce_sum(const Tensor& x0, int dim, bool keepdim, bool average, const char* op) {
  const Tensor x = autocast_input(x0, autocast_dtype(CastPolicy::kFloat32, {x0}));
  const int axis = x.shape().axis(dim, op);
  const Split s = split(x.shape(), axis);
  std::vector<float> result(size_t(s.outer * s.inner));
  sum_dim(result.data(), x, s, active_accumulation());
  const float scale = average ? 1.0f / float(s.d) : 1.0f;
  if (average) kernels::mul_scalar(result.data(), result.data(), scale, int64_t(result.size()));
  const Shape kept = x.shape().with(axis, 1);
  Tensor y = round_scoped(result, keepdim ? kept : x.shape().without(axis), x.dtype());
  return record(op, y, {x}, [x, kept, scale](const Tensor& dy) {
    accumulate_grad(x, broadcast_to(dy.reshape(kept), x.shape(), dy.dtype(), scale));
  });
}

}  // namespace

Tensor sum(const Tensor& x, int dim, bool keepdim) { return reduce_sum(x, dim, keepdim, false, "sum"); }
Tensor mean(const Tensor& x, int dim, bool keepdim) { return reduce_sum(x, dim, keepdim, true, "mean"); }

namespace {

Tensor reduce_all(const Tensor& x0, bool average, const char* op) {
  const Tensor x = autocast_input(x0, autocast_dtype(CastPolicy::kFloat32, {x0}));
  float total = 0.0f;
  sum_dim(&total, x, {1, x.numel(), 1}, active_accumulation());
  // The mean of no elements is 0 * (1 / 0) = NaN, as torch.mean gives.
  const float scale = average ? 1.0f / float(x.numel()) : 1.0f;
  Tensor y = round_scoped(std::vector<float>{total * scale}, {}, x.dtype());
  return record(op, y, {x},
                [x, scale](const Tensor& dy) { accumulate_grad(x, broadcast_to(dy, x.shape(), dy.dtype(), scale)); });
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce_all(x, false, "sum"); }
Tensor mean(const Tensor& x) { return reduce_all(x, true, "mean"); }

MaxResult max(const Tensor& x, int dim, bool keepdim) {
  const int axis = x.shape().axis(dim, "max");
  const Split s = split(x.shape(), axis);
  check(s.d > 0, "max: dim ", dim, " of shape ", x.shape(), " is empty");
  std::vector<float> best(size_t(s.outer * s.inner));
  std::vector<int32_t> arg(best.size());
  // One (d, inner) slice of x per row of for_rows (read in place when f32).
  detail::for_rows<1>({x}, s.outer, s.d * s.inner, false,
                      [&](const std::array<const float*, 1>& in, detail::RowBlock block, float*) {
                        for (int64_t o = 0; o < block.count; ++o) {
                          for (int64_t i = 0; i < s.inner; ++i) {
                            const float* row = in[0] + o * s.d * s.inner + i;
                            int64_t k = 0;
                            // NaN wins (torch.max propagates NaN); otherwise the first of equal maxima.
                            for (int64_t j = 1; j < s.d && !std::isnan(row[k * s.inner]); ++j) {
                              if (row[j * s.inner] > row[k * s.inner] || std::isnan(row[j * s.inner])) k = j;
                            }
                            const size_t r = size_t((block.first + o) * s.inner + i);
                            best[r] = row[k * s.inner];
                            arg[r] = int32_t(k);
                          }
                        }
                      });
  const Shape kept = x.shape().with(axis, 1);
  const Shape out_shape = keepdim ? kept : x.shape().without(axis);
  Tensor y = round_scoped(best, out_shape, x.dtype());  // exact: every value is an element of x
  Indices indices(arg, out_shape);
  y = record("max", y, {x}, [x, s, arg](const Tensor& dy) {
    // Scatter dy to the argmax positions; every other element gets 0 (the tape rounds the f32
    // gradient to x's dtype, exactly: its values are dy's).
    const std::vector<float> g = dy.to_vector();
    Tensor dx = Tensor::zeros(x.shape(), DType::f32);
    float* const out = dx.data<float>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const size_t r = size_t(o * s.inner + i);
        out[(o * s.d + arg[r]) * s.inner + i] = g[r];
      }
    }
    accumulate_grad(x, dx);
  });
  return {y, std::move(indices)};
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const Shape check_shape = detail::broadcast_shapes(shape, x.shape(), "sum_to");
  check(check_shape == x.shape(), "sum_to: cannot sum shape ", x.shape(), " to ", shape);
  // x's dims as runs of summed and kept dims (size-1 dims dropped, neighbours of one kind
  // merged), e.g. (B, T, C) -> (C) is one summed run B*T and one kept run C.
  struct Run {
    int64_t size;
    bool summed;
  };
  std::vector<Run> runs;
  const int nd = x.ndim();
  for (int i = 0; i < nd; ++i) {
    const int ii = shape.ndim() - nd + i;
    const int64_t d = x.shape()[i];
    if (d == 1) continue;
    const bool summed = (ii >= 0 ? shape[ii] : 1) == 1;
    if (!runs.empty() && runs.back().summed == summed) {
      runs.back().size *= d;
    } else {
      runs.push_back({d, summed});
    }
  }
  // Sum the summed runs innermost first, each as (outer, D, inner), through f32 intermediates.
  Tensor current = x;
  for (size_t r = runs.size(); r-- > 0;) {
    if (!runs[r].summed) continue;
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < r; ++i) outer *= runs[i].size;
    for (size_t i = r + 1; i < runs.size(); ++i) inner *= runs[i].size;
    Tensor next = Tensor::empty({outer * inner}, DType::f32);
    sum_dim(next.data<float>(), current, {outer, runs[r].size, inner});
    current = next;
    runs.erase(runs.begin() + std::ptrdiff_t(r));
  }
  Tensor y = round_scoped(current.to_vector(), shape, x.dtype());  // the sums (or x, if only 1-dims differ)
  return record("sum_to", y, {x},
                [x](const Tensor& dy) { accumulate_grad(x, broadcast_to(dy, x.shape(), dy.dtype())); });
}

}  // namespace hg
